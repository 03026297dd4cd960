"""Lenience (Leviathan et al. A.5; method ``lenient``): per round, the drafts the exact rule would also
have accepted against those accepted only because of lenience — the places where the output may leave
the target's — with the running share of such accepts."""

from __future__ import annotations

import plotly.graph_objects as go

from ..style import FATE_COLOURS, OKABE_ITO, RUN_COLOUR, base_layout
from . import MethodView, register, register_note

LENIENT_COLOUR = OKABE_ITO["orange"]  # the lossy accepts: the draft's colour (its token, kept on lenience)


def _lenient(trace) -> bool:
    return trace.method == "lenient"


def lenience_figure(trace, round_index: int) -> go.Figure:
    rounds = [r.index + 1 for r in trace.rounds]
    only = [len(r.detail.get("lenient_accepts") or ()) for r in trace.rounds]
    exact = [max(r.n_accepted - o, 0) for r, o in zip(trace.rounds, only)]
    running, total_only, total = [], 0, 0
    for r, o in zip(trace.rounds, only):
        total_only, total = total_only + o, total + r.n_accepted
        running.append(total_only / total if total else None)
    lenience = next((r.detail.get("lenience") for r in trace.rounds if "lenience" in r.detail), None)
    selected = max(0, min(int(round_index), len(trace.rounds) - 1)) + 1
    fig = go.Figure()
    fig.add_trace(go.Bar(x=rounds, y=exact, name="accepted (the exact rule agrees)", marker_color=FATE_COLOURS["accepted"],
                         hovertemplate="round %{x}<br>%{y} accepted as the exact rule would<extra></extra>"))
    fig.add_trace(go.Bar(x=rounds, y=only, name="accepted only by lenience", marker_color=LENIENT_COLOUR,
                         hovertemplate="round %{x}<br>%{y} accepted only because of lenience<extra></extra>"))
    fig.add_trace(go.Scatter(x=rounds, y=running, name="share of accepts due to lenience (right axis)", yaxis="y2",
                             mode="lines", line={"color": RUN_COLOUR, "width": 2},
                             hovertemplate="after round %{x}<br>%{y:.1%} of the accepted drafts<extra></extra>"))
    fig.add_vline(x=selected, line={"color": "#111827", "dash": "dot", "width": 1})
    fig.update_layout(barmode="stack", xaxis={"title": {"text": "round"}},
                      yaxis={"title": {"text": "accepted drafts"}, "rangemode": "tozero"},
                      yaxis2={"title": {"text": "share due to lenience"}, "overlaying": "y", "side": "right",
                              "range": [0, 1.02], "tickformat": ".0%"})
    words = f"l = {lenience:g}" if isinstance(lenience, (int, float)) else "lenience"
    return base_layout(fig, f"Lenience ({words}): accepts the exact rule would have refused", height=320)


register(MethodView(
    name="lenience",
    title="Lenience: lossy accepts",
    applies=_lenient,
    render=lenience_figure,
    description="Per round, drafts accepted as the exact rule would and those accepted only because of lenience.",
))
register_note("lenient", "Lenience (Leviathan et al. A.5) accepts a draft with probability min(1, p/(l·q)) — greedy: "
                         "when the target gives it at least l × its top probability — so below l = 1 the output can "
                         "differ from the target's (no token more than 1/l times as likely as the target makes it). "
                         "Token agreement with the target's own output is measured against the autoregressive "
                         "baseline run.")
