"""The theory lab's draft (method ``synthetic``): how many drafts each round accepted, against what i.i.d.
Bernoulli(α) acceptance predicts (Leviathan et al. 3.1): with a round's γ drafts, P(i accepted) = α^i (1 − α)
for i < γ and α^γ for i = γ — the distribution whose mean is eq. 1's expected tokens minus one."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from ..style import BASELINE_COLOUR, FATE_COLOURS, base_layout
from . import MethodView, register, register_note
from .positions import accepted_lengths, expected_accepts


def _synthetic(trace) -> bool:
    return trace.method == "synthetic"


def _dialled_alpha(trace) -> float | None:
    alpha = (trace.settings.options or {}).get("alpha")
    return float(alpha) if isinstance(alpha, (int, float)) and 0 <= alpha <= 1 else None


def acceptance_length_figure(trace, round_index: int) -> go.Figure:
    drafted = [r for r in trace.rounds if r.drafted]
    seen = accepted_lengths(drafted)
    most = len(seen) - 1
    fig = go.Figure()
    fig.add_trace(go.Bar(x=list(range(most + 1)), y=seen, name="rounds of this run", marker_color=FATE_COLOURS["accepted"],
                         hovertemplate="%{y} rounds accepted %{x} drafts<extra></extra>"))
    alpha = _dialled_alpha(trace)
    if alpha is not None and drafted:
        expected = expected_accepts(alpha, [len(r.drafted) for r in drafted], most)
        fig.add_trace(go.Scatter(x=list(range(most + 1)), y=expected, mode="lines+markers",
                                 name=f"expected with i.i.d. acceptance at α = {alpha:g}",
                                 line={"color": BASELINE_COLOUR, "dash": "dash"},
                                 hovertemplate="expected %{y:.1f} rounds with %{x} accepted<extra></extra>"))
    if 0 <= round_index < len(trace.rounds) and trace.rounds[round_index].drafted:
        chosen = min(trace.rounds[round_index].n_accepted, most)
        fig.add_vline(x=chosen, line={"color": "#111827", "dash": "dot", "width": 1})
    fig.update_layout(xaxis={"title": {"text": "drafts accepted in a round"}, "dtick": 1},
                      yaxis={"title": {"text": "rounds"}, "rangemode": "tozero"}, bargap=0.3)
    words = "" if alpha is None else f" (dialled α = {alpha:g}; α̂ = {trace.summary.alpha_hat or 0:.2f})"
    if not math.isfinite(trace.summary.alpha_hat or 0):
        words = ""
    return base_layout(fig, f"Theory lab: accepted drafts per round against i.i.d. acceptance{words}", height=320)


register(MethodView(
    name="synthetic-acceptance",
    title="Theory lab: acceptance against i.i.d. Bernoulli(α)",
    applies=_synthetic,
    render=acceptance_length_figure,
    description="How many drafts each round accepted, against the truncated geometric law of Leviathan et al. 3.1.",
))
register_note("synthetic", "The theory lab's synthetic draft proposes the target's own next token with probability α "
                           "(else another) and spends c × the target's one-token forward per step, so Theorem 3.8's "
                           "assumptions hold by construction; verification is exact, so the output is the target's. "
                           "It reads the target's greedy output, decoded once before the run (not timed): greedy only.")
