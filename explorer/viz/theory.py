"""Theory: Leviathan et al.'s closed forms, with the current run placed on them.

Three panels (formulas from ``explorer.theory``):
    1. expected wall-time improvement (Theorem 3.8)  (1 − α^(γ+1)) / ((1 − α)(γc + 1))  against γ
    2. the optimal γ (argmax of Theorem 3.8 over integers)  against α, one curve per cost ratio c
    3. the factor of arithmetic operations (Theorem 3.11)  (1 − α)(γĉ + γ + 1) / (1 − α^(γ+1))  against γ
α and c (and ĉ) come from sliders; a run adds its measured α̂ and c (dashed curves), its predicted
speedup at its mean γ (Theorem 3.8 at α̂, c) and its measured speedup (tokens/s ÷ autoregressive tokens/s).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer import theory

from .trust import measured_speedup
from .style import BASELINE_COLOUR, RUN_COLOUR, SERIES, TARGET_COLOUR, base_layout
from .text import plotly_text

GAMMA_MAX = 16
COST_RATIOS = (0.01, 0.05, 0.1, 0.2, 0.5)
COST_COLOURS = SERIES
ALPHAS = np.round(np.arange(0.02, 0.991, 0.01), 2)
OPTIMAL_GAMMA_MAX = 32
PANEL_TITLES = (
    "Expected speedup (Thm 3.8) vs γ",
    "Optimal γ vs α (Thm 3.8 argmax)",
    "Arithmetic operations (Thm 3.11) vs γ",
)


def gamma_axis(trace=None) -> np.ndarray:
    """γ = 1 … 16, stretched to cover the run's mean γ."""
    top = GAMMA_MAX
    if trace is not None and trace.summary.mean_gamma:
        top = max(top, int(np.ceil(trace.summary.mean_gamma)) + 2)
    return np.arange(1, top + 1)


def optimal_gamma_curve(c: float, alphas=ALPHAS) -> list[int]:
    """The integer γ maximising Theorem 3.8 at each α, for one cost ratio c."""
    return [theory.optimal_gamma(float(a), c, max_gamma=OPTIMAL_GAMMA_MAX) for a in alphas]


def theory_figure(alpha: float, c: float, c_hat: float, trace=None, baseline=None) -> go.Figure:
    """The three panels for the sliders' α, c and ĉ, with the run's α̂, c and speedups when given."""
    alpha, c, c_hat = float(alpha), float(c), float(c_hat)
    gammas = gamma_axis(trace)
    fig = make_subplots(rows=1, cols=3, subplot_titles=PANEL_TITLES, horizontal_spacing=0.08)

    # 1. speedup against γ
    speed = theory.speedup(alpha, gammas, c)
    fig.add_trace(go.Scatter(
        x=gammas, y=speed, mode="lines+markers", name=f"Thm 3.8 at α={alpha:.2f}, c={c:.2f}",
        line={"color": TARGET_COLOUR}, marker={"size": 5},
        hovertemplate="γ = %{x}<br>expected speedup ×%{y:.3f}<extra>α=%{meta[0]:.2f}, c=%{meta[1]:.2f}</extra>",
        meta=[alpha, c],
    ), row=1, col=1)
    best = theory.optimal_gamma(alpha, c, max_gamma=int(gammas[-1]))
    fig.add_trace(go.Scatter(
        x=[best], y=[float(theory.speedup(alpha, best, c))], mode="markers", name=f"optimal γ = {best}",
        marker={"symbol": "star", "size": 14, "color": TARGET_COLOUR, "line": {"color": "white", "width": 1}},
        hovertemplate="optimal γ = %{x}<br>expected speedup ×%{y:.3f}<extra></extra>",
    ), row=1, col=1)
    fig.add_hline(y=1.0, line={"color": "#9ca3af", "dash": "dot", "width": 1}, row=1, col=1)

    # 2. optimal γ against α, one curve per c (the slider's c drawn thick)
    ratios = sorted(set(COST_RATIOS) | {round(c, 3)})
    for n, ratio in enumerate(ratios):
        is_slider = abs(ratio - round(c, 3)) < 1e-9
        fig.add_trace(go.Scatter(
            x=ALPHAS, y=optimal_gamma_curve(ratio), mode="lines", line_shape="hv",
            name=f"c={ratio:g}" + (" (slider)" if is_slider else ""),
            line={"width": 3.5 if is_slider else 1.5, "color": COST_COLOURS[n % len(COST_COLOURS)]},
            legendgroup="optimal", legendgrouptitle_text="optimal γ at",
            hovertemplate=f"c = {ratio:g}<br>α = %{{x:.2f}}<br>optimal γ = %{{y}}<extra></extra>",
        ), row=1, col=2)

    # 3. arithmetic operations against γ
    ops = theory.operations_factor(alpha, gammas, c_hat)
    fig.add_trace(go.Scatter(
        x=gammas, y=ops, mode="lines+markers", name=f"Thm 3.11 at α={alpha:.2f}, ĉ={c_hat:.2f}",
        line={"color": "#0891b2"}, marker={"size": 5},
        hovertemplate="γ = %{x}<br>operations ×%{y:.3f} of autoregressive<extra></extra>",
    ), row=1, col=3)
    fig.add_hline(y=1.0, line={"color": "#9ca3af", "dash": "dot", "width": 1}, row=1, col=3)

    title = "Theory (Leviathan et al. 2023)"
    if trace is not None:
        title += _add_run(fig, trace, baseline, gammas, c_hat)

    fig.update_xaxes(title_text="γ (drafted tokens per round)", dtick=2, row=1, col=1)
    fig.update_yaxes(title_text="speedup over autoregressive (×)", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title_text="α (acceptance rate)", range=[0, 1], row=1, col=2)
    # a log axis with its own ticks: Plotly's own put 2…9 under each decade, overlapping and unlabelled
    fig.update_yaxes(title_text="optimal γ (tokens)", type="log", row=1, col=2, tickvals=LOG_TICKS,
                     ticktext=[str(t) for t in LOG_TICKS], minor={"showgrid": False})
    fig.update_xaxes(title_text="γ (drafted tokens per round)", dtick=2, row=1, col=3)
    fig.update_yaxes(title_text="operations (× autoregressive)", rangemode="tozero", row=1, col=3)
    return base_layout(fig, title, height=470)


LOG_TICKS = (1, 2, 4, 8, 16, 32, 64)


def _add_run(fig: go.Figure, trace, baseline, gammas, c_hat: float) -> str:
    """Mark the run's α̂, c, predicted and measured speedups; returns the title's run part."""
    s = trace.summary
    if s.alpha_hat is None or s.c_measured is None or not s.mean_gamma:
        return f" · this run ({plotly_text(trace.method)}) has no α̂ / c to place"
    a_hat, c_run, g = min(float(s.alpha_hat), 1.0), float(s.c_measured), float(s.mean_gamma)
    run_meta = f"α̂={a_hat:.2f}, c={c_run:.3f}"
    fig.add_trace(go.Scatter(
        x=gammas, y=theory.speedup(a_hat, gammas, c_run), mode="lines", name=f"this run: {run_meta}",
        line={"color": RUN_COLOUR, "dash": "dash"}, legendgroup="run",
        hovertemplate="γ = %{x}<br>expected speedup ×%{y:.3f}<extra>this run's α̂, c</extra>",
    ), row=1, col=1)
    predicted = s.predicted_speedup if s.predicted_speedup is not None else float(theory.speedup(a_hat, g, c_run))
    fig.add_trace(go.Scatter(
        x=[g], y=[predicted], mode="markers", name=f"predicted ×{predicted:.2f}",
        marker={"symbol": "diamond", "size": 12, "color": RUN_COLOUR},
        hovertemplate="mean γ = %{x:.2f}<br>predicted speedup ×%{y:.3f}<extra>Thm 3.8 at α̂, c</extra>",
    ), row=1, col=1)
    title = f" · this run: {run_meta}, γ̄={g:.1f}, predicted ×{predicted:.2f}"
    measured = measured_speedup(trace, baseline)
    if measured is not None:
        fig.add_trace(go.Scatter(
            x=[g], y=[measured], mode="markers", name=f"measured ×{measured:.2f}",
            marker={"symbol": "x", "size": 13, "color": BASELINE_COLOUR, "line": {"width": 1}},
            hovertemplate="mean γ = %{x:.2f}<br>measured speedup ×%{y:.3f}<extra>tokens/s ÷ autoregressive</extra>",
        ), row=1, col=1)
        title += f", measured ×{measured:.2f}"
    fig.add_trace(go.Scatter(
        x=[a_hat], y=[g], mode="markers", name="this run (α̂, γ̄)", legendgroup="run", showlegend=False,
        marker={"symbol": "diamond", "size": 12, "color": RUN_COLOUR},
        hovertemplate="α̂ = %{x:.3f}<br>mean γ = %{y:.2f}<extra>this run</extra>",
    ), row=1, col=2)
    fig.add_trace(go.Scatter(
        x=gammas, y=theory.operations_factor(a_hat, gammas, c_hat), mode="lines", name="this run's α̂",
        line={"color": RUN_COLOUR, "dash": "dash"}, legendgroup="run", showlegend=False,
        hovertemplate="γ = %{x}<br>operations ×%{y:.3f}<extra>this run's α̂</extra>",
    ), row=1, col=3)
    return title
