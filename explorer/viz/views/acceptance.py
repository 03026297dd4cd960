"""Speculative methods: drafted and accepted tokens in every round, and the running estimate α̂.

α̂ = accepted / tested drafts so far (a discarded draft is never tested), the estimate of the paper's
acceptance rate α (Leviathan et al., Definition 3.1).
"""

from __future__ import annotations

import plotly.graph_objects as go

from ...words import ordinal
from ..style import FATE_COLOURS, RUN_COLOUR, base_layout
from . import MethodView, drawn_rounds, register


def acceptance_figure(trace, round_index: int) -> go.Figure:
    selected = max(0, min(int(round_index), len(trace.rounds) - 1)) + 1
    drawn, every = drawn_rounds(len(trace.rounds), selected - 1)
    running, tested, kept = [], 0, 0
    for r in trace.rounds:  # the running α̂ (``trace.alpha_hat`` over the rounds so far)
        kept += r.n_accepted
        tested += r.tested
        running.append(kept / tested if tested else None)
    rounds = [trace.rounds[j].index + 1 for j in drawn]
    accepted = [trace.rounds[j].n_accepted for j in drawn]
    refused = [len(trace.rounds[j].drafted) - trace.rounds[j].n_accepted for j in drawn]
    running = [running[j] for j in drawn]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=rounds, y=accepted, name="accepted drafts", marker_color=FATE_COLOURS["accepted"],
                         hovertemplate="round %{x}<br>accepted: %{y} tokens<extra></extra>"))
    fig.add_trace(go.Bar(x=rounds, y=refused, name="rejected + discarded drafts", marker_color=FATE_COLOURS["rejected"],
                         opacity=0.55, hovertemplate="round %{x}<br>not accepted: %{y} tokens<extra></extra>"))
    fig.add_trace(go.Scatter(x=rounds, y=running, name="running α̂ (right axis)", yaxis="y2", mode="lines",
                             line={"color": RUN_COLOUR, "width": 2},
                             hovertemplate="after round %{x}<br>α̂ = %{y:.3f}<extra></extra>"))
    fig.add_vline(x=selected, line={"color": "#111827", "dash": "dot", "width": 1})
    fig.update_layout(
        barmode="stack",
        xaxis={"title": {"text": "round"}},
        yaxis={"title": {"text": "drafted tokens"}, "rangemode": "tozero"},
        yaxis2={"title": {"text": "α̂ (acceptance rate)"}, "overlaying": "y", "side": "right", "range": [0, 1.02]},
    )
    thinned = f", every {ordinal(every)} of {len(trace.rounds)} rounds drawn" if every > 1 else ""
    return base_layout(fig, f"Drafted vs accepted tokens per round (selected: round {selected}{thinned})", height=320)


register(MethodView(
    name="acceptance",
    title="Acceptance per round",
    applies=lambda trace: any(r.drafted for r in trace.rounds),
    render=acceptance_figure,
    description="How many of each round's drafts the target accepted, and the running α̂.",
))
