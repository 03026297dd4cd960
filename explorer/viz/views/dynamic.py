"""Dynamic γ (the reproduction report's "varying γ"; ``dynamic-gamma`` and ``dynamic-gamma-priced``):
left, the draft length chosen each round beside the running α̂ it was chosen from; right, the selected
round's objective — Theorem 3.8's improvement over a continuous γ at that round's α̂ and c, priced by the
measured T(γ+1)/T(1) for the priced variant — with its maximum, the gradient ascent's path to it and the
whole γ drafted."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ... import theory
from ..style import BASELINE_COLOUR, DRAFT_COLOUR, FATE_COLOURS, RUN_COLOUR, base_layout
from ..text import plotly_text
from . import MethodView, register


def _dynamic(trace) -> bool:
    return any(str(r.controller.get("kind", "")).startswith("dynamic-gamma") for r in trace.rounds)


def dynamic_figure(trace, round_index: int) -> go.Figure:
    rounds = [r for r in trace.rounds if "alpha_hat" in r.controller]
    selected = max(0, min(int(round_index), len(trace.rounds) - 1))
    fig = make_subplots(rows=1, cols=2, column_widths=[0.55, 0.45], horizontal_spacing=0.2,
                        specs=[[{"secondary_y": True}, {}]],
                        subplot_titles=("γ chosen each round, from the running α̂",
                                        f"Round {selected + 1}: the objective over γ"))
    x = [r.index + 1 for r in rounds]
    fig.add_trace(go.Scatter(x=x, y=[r.controller.get("gamma") for r in rounds], name="γ chosen", mode="lines+markers",
                             line={"color": DRAFT_COLOUR, "width": 2.5}, line_shape="hv",
                             customdata=[[r.controller.get("gamma_continuous"), len(r.drafted), r.n_accepted]
                                         for r in rounds],
                             hovertemplate="round %{x}<br>γ = %{y} (continuous optimum %{customdata[0]:.2f})"
                                           "<br>drafted %{customdata[1]}, accepted %{customdata[2]}<extra></extra>"),
                  row=1, col=1, secondary_y=False)
    fig.add_trace(go.Scatter(x=x, y=[r.n_accepted for r in rounds], name="accepted", mode="markers",
                             marker={"color": FATE_COLOURS["accepted"], "size": 6},
                             hovertemplate="round %{x}<br>accepted %{y}<extra></extra>"), row=1, col=1, secondary_y=False)
    fig.add_trace(go.Scatter(x=x, y=[r.controller.get("alpha_hat") for r in rounds], name="α̂ (right axis)",
                             mode="lines", line={"color": RUN_COLOUR, "width": 2},
                             hovertemplate="round %{x}<br>α̂ = %{y:.3f} (before the round)<extra></extra>"),
                  row=1, col=1, secondary_y=True)
    fig.add_vline(x=selected + 1, line={"color": "#111827", "dash": "dot", "width": 1}, row=1, col=1)
    _objective(fig, trace, trace.rounds[selected] if trace.rounds else None)
    fig.update_xaxes(title_text="round", row=1, col=1)
    fig.update_yaxes(title_text="draft length γ (tokens)", rangemode="tozero", row=1, col=1, secondary_y=False)
    fig.update_yaxes(title_text="α̂ (acceptance rate)", range=[0, 1.02], dtick=0.25, showgrid=False, row=1, col=1,
                     secondary_y=True)
    fig.update_xaxes(title_text="γ (continuous)", row=1, col=2)
    fig.update_yaxes(title_text="expected speed-up over ar (×)", rangemode="tozero", row=1, col=2)
    return base_layout(fig, f"Dynamic γ ({plotly_text(trace.settings.controller)}): each round maximises Theorem 3.8 at the "
                            "run's own α̂ and c", height=400)


def _objective(fig: go.Figure, trace, r) -> None:
    c = r.controller if r is not None else {}
    if "alpha_hat" not in c:
        fig.add_annotation(text="no decision recorded in this round", showarrow=False, x=0.5, y=0.5,
                           xref="x2 domain", yref="y3 domain")
        return
    alpha, cost, ratio = c["alpha_hat"], c.get("c") or 0.0, c.get("verify_ratio")
    cap = max(int(trace.settings.gamma), 1)
    gammas = np.linspace(1, cap, 200) if cap > 1 else np.array([1.0])
    curve = theory.speedup_curve(alpha, cost, gammas, ratio)
    verify = "T(γ+1)/T(1) as measured" if ratio else "one step (the paper)"
    fig.add_trace(go.Scatter(x=gammas, y=curve, name="objective f(γ)", mode="lines", line={"color": BASELINE_COLOUR},
                             hovertemplate=f"γ = %{{x:.2f}}<br>f = %{{y:.3f}}×<br>α̂ = {alpha:.3f}, c = {cost:.3f}, "
                                           f"verify = {verify}<extra></extra>"), row=1, col=2)
    path = [g for g in c.get("ascent") or [] if isinstance(g, (int, float))]
    if path:
        fig.add_trace(go.Scatter(x=path, y=theory.speedup_curve(alpha, cost, np.array(path), ratio), name="ascent steps",
                                 mode="lines+markers", marker={"size": 6, "color": DRAFT_COLOUR, "symbol": "circle-open"},
                                 line={"color": DRAFT_COLOUR, "width": 1, "dash": "dot"},
                                 hovertemplate="step to γ = %{x:.3f}<br>f = %{y:.3f}×<extra></extra>"), row=1, col=2)
    best = c.get("gamma_continuous")
    if isinstance(best, (int, float)):
        fig.add_trace(go.Scatter(x=[best], y=[float(theory.speedup_curve(alpha, cost, best, ratio))], name="maximum",
                                 mode="markers", marker={"size": 12, "color": RUN_COLOUR, "symbol": "star"},
                                 hovertemplate="maximum at γ = %{x:.2f}<br>f = %{y:.3f}×<extra></extra>"), row=1, col=2)
    chosen = c.get("gamma")
    if isinstance(chosen, int):
        fig.add_trace(go.Scatter(x=[chosen], y=[float(theory.speedup_curve(alpha, cost, chosen, ratio))], name="γ drafted",
                                 mode="markers", marker={"size": 11, "color": FATE_COLOURS["accepted"], "symbol": "diamond"},
                                 hovertemplate="drafted γ = %{x}<br>f = %{y:.3f}×<extra></extra>"), row=1, col=2)


register(MethodView(
    name="dynamic-gamma",
    title="Dynamic γ",
    applies=_dynamic,
    render=dynamic_figure,
    description="γ per round chosen by gradient ascent on Theorem 3.8 at the run's α̂ and c, and the selected "
                "round's objective curve with its maximum.",
))
