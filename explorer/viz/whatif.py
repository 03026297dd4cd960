"""What if: a serving engine's acceptance by draft position and the speed-up it implies at each γ.

Built from ``explorer.whatif.analyse`` results (plain data), one colour per drafter, so a production
drafter and the explorer's own sit on one chart:
    left   the share of drafts whose position i was accepted (bars), with the i.i.d. law α^i that gives
           the same mean acceptance length (dotted; Leviathan et al., Definition 3.1)
    right  S(γ) = E(γ) / (γ·c + T(γ+1)/T(1)) against γ from the observed shares (solid) and the i.i.d. fit
           (dotted), the best γ starred
Names come from the uploaded file's labels: escaped, never markup.
"""

from __future__ import annotations


import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import BASELINE_COLOUR, SERIES, base_layout, empty_figure
from .text import plotly_text

TITLES = ("Accepted share by draft position", "Speed-up by draft length γ")


def whatif_figure(results: list[dict]) -> go.Figure:
    """The two panels for ``results`` (at most ``len(SERIES)`` drafters are drawn; the rest are named)."""
    if not results:
        return empty_figure("What if: acceptance by position and the best γ",
                            "Paste an engine's metrics (or upload them) and press Analyse.")
    # stacked, not side by side: two panels in a row crowd their titles together at a phone's width
    fig = make_subplots(rows=2, cols=1, subplot_titles=TITLES, vertical_spacing=0.2)
    drawn = results[: len(SERIES)]
    for n, r in enumerate(drawn):
        colour, name = SERIES[n], plotly_text(_short(r["name"]))
        positions = list(range(1, r["positions"] + 1))
        kind = "counted" if r["per_position_observed"] else "i.i.d. fit of a mean"
        fig.add_trace(go.Bar(
            x=positions, y=r["acceptance_by_position"], name=name, legendgroup=str(n), marker_color=colour,
            opacity=1.0 if r["per_position_observed"] else 0.45,
            customdata=[["no draft got this far" if c is None else f"{c:.1%}"] for c in r["conditional_by_position"]],
            hovertemplate=f"{name}<br>position %{{x}}: %{{y:.1%}} of drafts accepted it ({kind})"
                          "<br>given the earlier positions accepted: %{customdata[0]}<extra></extra>"),
            row=1, col=1)
        fig.add_trace(go.Scatter(
            x=positions, y=r["iid_acceptance_by_position"], mode="lines+markers", legendgroup=str(n),
            name="dotted: one i.i.d. rate α, same mean length", showlegend=n == 0,
            line={"color": colour, "dash": "dot", "width": 1.5}, marker={"size": 5},
            hovertemplate=f"i.i.d. α = {r['iid_alpha']:.2f}: α^%{{x}} = %{{y:.1%}}<extra>{name}</extra>"),
            row=1, col=1)
        gammas = list(range(len(r["speedup_by_gamma"])))
        fig.add_trace(go.Scatter(
            x=gammas, y=r["speedup_by_gamma"], mode="lines+markers", legendgroup=str(n), showlegend=False,
            line={"color": colour, "width": 2.5}, marker={"size": 6}, name=name,
            customdata=[[e] for e in r["expected_tokens_by_gamma"]],
            hovertemplate=f"{name}<br>γ = %{{x}}: ×%{{y:.2f}} (%{{customdata[0]:.2f}} tokens a forward)<extra></extra>"),
            row=2, col=1)
        fig.add_trace(go.Scatter(
            x=gammas, y=r["iid_speedup_by_gamma"], mode="lines", legendgroup=str(n), showlegend=False,
            line={"color": colour, "dash": "dot", "width": 1.5}, name=f"{name} (i.i.d.)",
            hovertemplate=f"{name}, i.i.d. fit<br>γ = %{{x}}: ×%{{y:.2f}}<extra></extra>"), row=2, col=1)
        best = r["best_gamma"]
        fig.add_trace(go.Scatter(
            x=[best], y=[r["best_speedup"]], mode="markers", legendgroup=str(n), showlegend=False,
            marker={"symbol": "star", "size": 16, "color": colour, "line": {"color": "white", "width": 1}},
            name=f"best γ = {best}",
            hovertemplate=f"{name}<br>best γ = {best}: ×{r['best_speedup']:.2f}<extra></extra>"), row=2, col=1)
    fig.add_hline(y=1.0, line={"color": BASELINE_COLOUR, "dash": "dash", "width": 1}, row=2, col=1)
    fig.update_xaxes(title_text="draft position i", dtick=1, row=1, col=1)
    fig.update_yaxes(title_text="share of drafts", range=[0, 1.02], tickformat=".0%", row=1, col=1)
    fig.update_xaxes(title_text="γ: tokens drafted per round", dtick=1, row=2, col=1)
    fig.update_yaxes(title_text="speed-up (×)", rangemode="tozero", row=2, col=1)
    fig.update_layout(barmode="group", bargap=0.25)
    title = (f"What if: best γ = {results[0]['best_gamma']}" if len(results) == 1 else
             f"What if: {len(results)} drafters, best γ " + ", ".join(str(r["best_gamma"]) for r in results[:4])
             + (" …" if len(results) > 4 else ""))
    if len(results) > len(drawn):
        title += f" ({len(results) - len(drawn)} more not drawn)"
    fig = base_layout(fig, title, height=620 + 22 * len(drawn))
    fig.update_layout(legend={"y": -0.1})
    return fig


def _short(name: str, most: int = 34) -> str:
    """A legend's name within a phone's width (the words under the chart carry the whole name)."""
    return name if len(name) <= most else name[: most - 1] + "…"
