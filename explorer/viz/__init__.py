"""Views of a trace: Plotly figures and token HTML, built from ``RunTrace`` data only.

No model, torch or gradio here, so that every view replays a saved trace anywhere. Modules:
``tokens`` (the coloured token view), ``rounds`` (p vs q per drafted position), ``latency`` (time per
round, throughput against autoregressive), ``theory`` (Leviathan et al.'s closed forms with the run on
them), ``summary`` (words), ``explain`` (why a run was as fast as it was), ``views`` (the registry of method-specific views).
"""

from .explain import speed_explanation
from .guided import GUIDE_CSS, guided_round_html
from .guided import STEPS as GUIDE_STEPS
from .keeping import KEEPING_CSS, Keeping, keeping_html
from .latency import cumulative_throughput, latency_figure
from .trust import measured_speedup, speedup_doubt
from .rounds import round_detail_figure, round_panels
from .style import empty_figure
from .summary import BANNER_CSS, method_banner, run_summary
from .text import safe_markdown
from .theory import theory_figure
from .tokens import (FATES, TOKEN_CSS, fate_counts, next_refusal, opening_round, round_caption, round_fates,
                     token_html)
from .views import MethodView, discover, register, register_note, views_for

__all__ = [
    "BANNER_CSS", "FATES", "GUIDE_CSS", "GUIDE_STEPS", "KEEPING_CSS", "Keeping", "guided_round_html", "keeping_html",
    "MethodView", "TOKEN_CSS", "cumulative_throughput", "discover", "empty_figure",
    "fate_counts", "latency_figure", "measured_speedup", "method_banner", "next_refusal", "opening_round", "register",
    "register_note", "round_caption", "round_detail_figure", "round_fates", "round_panels", "run_summary",
    "safe_markdown", "speed_explanation", "speedup_doubt", "theory_figure", "token_html", "views_for",
]
