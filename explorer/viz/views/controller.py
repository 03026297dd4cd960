"""Adaptive draft length: γ round by round under a controller that changes it (e.g. ``heuristic``,
Hugging Face's schedule: +2 after a fully accepted round, −1 otherwise)."""

from __future__ import annotations

import plotly.graph_objects as go

from ..style import DRAFT_COLOUR, FATE_COLOURS, base_layout
from ..text import plotly_text
from . import MethodView, register


def _adapts(trace) -> bool:
    return any("gamma_after" in r.controller for r in trace.rounds)


def _why_stopped(r) -> str:
    """A ``confident`` round's stop in words; the floor is optional in a loaded trace (the schema checks both)."""
    floor = r.controller.get("floor")
    below = f", below the floor {floor:.2f}" if floor is not None else ""
    top = r.controller["unsure"]
    return f"the draft stopped after {len(r.drafted)} tokens: its top probability was {top:.2f}{below}"


def controller_figure(trace, round_index: int) -> go.Figure:
    rounds = [r.index + 1 for r in trace.rounds]
    planned = [r.controller.get("gamma_before", r.controller.get("gamma")) for r in trace.rounds]
    drafted = [len(r.drafted) for r in trace.rounds]
    accepted = [r.n_accepted for r in trace.rounds]
    selected = max(0, min(int(round_index), len(trace.rounds) - 1)) + 1
    fig = go.Figure()
    # what the draft rested on (cost-aware with prompt lookup: the matched n-gram), where the controller says
    evidence = [plotly_text(r.controller.get("evidence") or "") for r in trace.rounds]
    fig.add_trace(go.Scatter(x=rounds, y=planned, name="γ planned by the controller", mode="lines", line_shape="hv",
                             line={"color": DRAFT_COLOUR, "width": 2.5}, customdata=evidence,
                             hovertemplate="round %{x}<br>γ = %{y}<br>%{customdata}<extra></extra>"))
    fig.add_trace(go.Scatter(x=rounds, y=drafted, name="drafted", mode="markers",
                             marker={"color": DRAFT_COLOUR, "symbol": "circle-open", "size": 8},
                             hovertemplate="round %{x}<br>drafted %{y} tokens<extra></extra>"))
    fig.add_trace(go.Scatter(x=rounds, y=accepted, name="accepted", mode="markers",
                             marker={"color": FATE_COLOURS["accepted"], "size": 6},
                             hovertemplate="round %{x}<br>accepted %{y} tokens<extra></extra>"))
    stopped = [r for r in trace.rounds if "unsure" in r.controller]  # ``confident``: the draft was unsure
    if stopped:
        fig.add_trace(go.Scatter(
            x=[r.index + 1 for r in stopped], y=[len(r.drafted) for r in stopped], name="draft stopped: unsure",
            mode="markers", marker={"color": FATE_COLOURS["rejected"], "symbol": "x-thin-open", "size": 12,
                                    "line": {"width": 2}},
            customdata=[_why_stopped(r) for r in stopped], hovertemplate="round %{x}<br>%{customdata}<extra></extra>"))
    fig.add_vline(x=selected, line={"color": "#111827", "dash": "dot", "width": 1})
    fig.update_xaxes(title_text="round")
    fig.update_yaxes(title_text="tokens", rangemode="tozero")
    return base_layout(fig, f"Draft length chosen by the {plotly_text(trace.settings.controller)} controller", height=300)


register(MethodView(
    name="controller",
    title="Draft-length controller",
    applies=_adapts,
    render=controller_figure,
    description="γ per round as an adaptive controller set it, against what was drafted and accepted.",
))
