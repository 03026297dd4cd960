"""Acceptance by draft position and the accepted-length histogram, for every method that drafts.

Left: of the drafts the target tested at position i of a round (1 = the first draft), the share it
accepted. Under Leviathan et al.'s i.i.d. assumption (Definition 3.1) every position is accepted with the
same α; a falling bar shows drafts that drift from the target the further they run. Right: how many
drafts each round accepted, against the truncated geometric law that i.i.d. acceptance at the run's α̂
implies (P(i) = α^i (1 − α) for i < γ, α^γ for i = γ; eq. 1's expected tokens are its mean plus one).
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...trace import acceptance_by_position
from ..style import BASELINE_COLOUR, FATE_COLOURS, base_layout
from . import MethodView, register


def accepted_lengths(rounds) -> list[int]:
    """Rounds (that drafted) with 0, 1, … the longest draft accepted."""
    drafted = [r for r in rounds if r.drafted]
    most = max((len(r.drafted) for r in drafted), default=0)
    counts = [0] * (most + 1)
    for r in drafted:
        counts[min(r.n_accepted, most)] += 1
    return counts


def expected_accepts(alpha: float, gammas: list[int], most: int) -> list[float]:
    """Expected number of rounds with 0 … ``most`` accepted drafts under i.i.d. acceptance at ``alpha``,
    summed over rounds of the given γs (the truncated geometric law above)."""
    counts = [0.0] * (most + 1)
    for g in gammas:
        for i in range(min(g, most) + 1):
            counts[i] += alpha ** i * ((1 - alpha) if i < g else 1.0)
    return counts


def positions_figure(trace, round_index: int) -> go.Figure:
    rounds = [r for r in trace.rounds if r.drafted]
    tested, accepted = acceptance_by_position(rounds)
    positions = list(range(1, len(tested) + 1))
    rates = [a / t if t else None for a, t in zip(accepted, tested)]
    lengths = accepted_lengths(rounds)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=["Acceptance by draft position", "Drafts accepted per round"])
    fig.add_trace(go.Bar(x=positions, y=rates, name="accepted share at a position", marker_color=FATE_COLOURS["accepted"],
                         customdata=list(zip(accepted, tested)),
                         hovertemplate="draft #%{x}: %{customdata[0]} of %{customdata[1]} tested accepted "
                                       "(%{y:.0%})<extra></extra>"), row=1, col=1)
    alpha = trace.summary.alpha_hat
    if alpha is not None and positions:
        fig.add_trace(go.Scatter(x=[0.5, len(positions) + 0.5], y=[alpha, alpha], mode="lines",
                                 name=f"run's α̂ = {alpha:.2f} (same at every position if i.i.d.)",
                                 line={"color": BASELINE_COLOUR, "dash": "dash"},
                                 hovertemplate=f"α̂ = {alpha:.2f}: accepted ÷ tested over the run<extra></extra>"),
                      row=1, col=1)
    fig.add_trace(go.Bar(x=list(range(len(lengths))), y=lengths, name="rounds of this run",
                         marker_color=FATE_COLOURS["target"],
                         hovertemplate="%{y} rounds accepted %{x} drafts<extra></extra>"), row=1, col=2)
    if alpha is not None and rounds:
        expected = expected_accepts(min(alpha, 1.0), [len(r.drafted) for r in rounds], len(lengths) - 1)
        fig.add_trace(go.Scatter(x=list(range(len(lengths))), y=expected, mode="lines+markers",
                                 name="expected rounds with i.i.d. acceptance at α̂",
                                 line={"color": BASELINE_COLOUR, "dash": "dot"},
                                 hovertemplate="expected %{y:.1f} rounds with %{x} accepted<extra></extra>"),
                      row=1, col=2)
    if 0 <= round_index < len(trace.rounds) and trace.rounds[round_index].drafted:
        chosen = min(trace.rounds[round_index].n_accepted, len(lengths) - 1)
        fig.add_vline(x=chosen, line={"color": "#111827", "dash": "dot", "width": 1}, row=1, col=2)
    fig.update_xaxes(title_text="draft position in the round", dtick=1, row=1, col=1)
    fig.update_yaxes(title_text="accepted ÷ tested", range=[0, 1.02], tickformat=".0%", row=1, col=1)
    fig.update_xaxes(title_text="drafts accepted in a round", dtick=1, row=1, col=2)
    fig.update_yaxes(title_text="rounds", rangemode="tozero", row=1, col=2)
    fig.update_layout(bargap=0.3)
    title = (f"Where drafts are accepted: {sum(accepted)} of {sum(tested)} tested drafts over {len(rounds)} drafting "
             "rounds")
    return base_layout(fig, title, height=360)


register(MethodView(
    name="acceptance-positions",
    title="Acceptance by draft position and accepted drafts per round",
    applies=lambda trace: any(r.drafted for r in trace.rounds),
    render=positions_figure,
    description="Which draft positions the target accepts, and how many drafts a round keeps against the "
                "i.i.d. law at α̂ (what serving engines report only as logs).",
))
