"""The theory lab's figure (``explorer.sweep.theory_sweep``): measured against Leviathan et al.'s closed forms.

One column per draft cost c; top row: speed-up over ``ar`` against γ, bottom row: tokens per round
against γ, one colour per α. Lines are theory — Theorem 3.8 as written (dotted: verification costs one
target step) and priced with this machine's measured T(γ+1)/T(1) (solid), eq. 1 below — markers the runs.
Where the markers leave the dotted line is the lesson: on a CPU the verification of γ + 1 tokens costs
more than one step, and a run's α̂ is a sample of a few dozen tests.

A speed-up the sweep withheld (``doubt``: its runs met another pace than plain decoding's, or it beat plain
decoding by more than its tokens per target forward allow, ``explorer.ratios``) gets no marker in the upper row: an
open marker at 0 says "withheld" and why when pointed at. Without a T(n) curve that can be, no priced line is drawn.
"""

from __future__ import annotations

import plotly.graph_objects as go
import textwrap

from plotly.subplots import make_subplots

from .style import SERIES, base_layout

ALPHA_COLOURS = SERIES


def theory_lab_figure(report: dict) -> go.Figure:
    points = report["points"]
    costs = sorted({p["c"] for p in points})
    alphas = sorted({p["alpha"] for p in points})
    fig = make_subplots(rows=2, cols=len(costs), shared_xaxes=True, vertical_spacing=0.12, horizontal_spacing=0.07,
                        subplot_titles=[f"c = {c:g}: speed-up over ar" for c in costs]
                        + [f"c = {c:g}: tokens per round" for c in costs])
    for col, c in enumerate(costs, 1):
        for a, colour in zip(alphas, ALPHA_COLOURS * 4):
            line = sorted((p for p in points if p["c"] == c and p["alpha"] == a), key=lambda p: p["gamma"])
            gammas = [p["gamma"] for p in line]
            first = col == 1
            custom = [[p["alpha_hat"] or 0, p["c_measured"] if p["c_measured"] is not None else float("nan"),
                       p["predicted_at_measured"] if p["predicted_at_measured"] is not None else float("nan")]
                      for p in line]
            fig.add_trace(go.Scatter(
                x=gammas, y=[p["predicted_speedup"] for p in line], mode="lines", name=f"α = {a:g}: Thm 3.8",
                legendgroup=f"a{a}", showlegend=False, line={"color": colour, "dash": "dot", "width": 1.5},
                hovertemplate=f"α = {a:g}, c = {c:g}, γ = %{{x}}<br>Thm 3.8 as written: ×%{{y:.2f}}<extra></extra>"),
                row=1, col=col)
            fig.add_trace(go.Scatter(
                x=gammas, y=[p["predicted_speedup_verify_cost"] for p in line], mode="lines",
                name=f"α = {a:g}", legendgroup=f"a{a}", showlegend=first, line={"color": colour, "width": 2},
                hovertemplate=f"α = {a:g}, c = {c:g}, γ = %{{x}}<br>Thm 3.8 priced by T(γ+1)/T(1): ×%{{y:.2f}}"
                              "<extra></extra>"), row=1, col=col)
            withheld = [p for p in line if p.get("doubt")]
            if withheld:
                fig.add_trace(go.Scatter(
                    x=[p["gamma"] for p in withheld], y=[0] * len(withheld), mode="markers",
                    name=f"α = {a:g}: withheld", legendgroup=f"a{a}", showlegend=False,
                    marker={"color": colour, "size": 9, "symbol": "x-thin-open", "line": {"color": colour, "width": 2}},
                    customdata=[["<br>".join(textwrap.wrap(p["doubt"], 60))] for p in withheld],
                    hovertemplate=f"α = {a:g}, c = {c:g}, γ = %{{x}}<br>measured speed-up withheld: "
                                  "%{customdata[0]}<extra></extra>"), row=1, col=col)
            fig.add_trace(go.Scatter(
                x=gammas, y=[None if p.get("doubt") else p["speedup_vs_ar"] for p in line], mode="markers",
                name=f"α = {a:g}: measured",
                legendgroup=f"a{a}", showlegend=False, marker={"color": colour, "size": 9, "line": {"color": "white",
                                                                                                  "width": 1}},
                customdata=custom,
                hovertemplate=f"α = {a:g}, c = {c:g}, γ = %{{x}}<br>measured ×%{{y:.2f}} over ar"
                              "<br>α̂ = %{customdata[0]:.2f}, c measured = %{customdata[1]:.2f}"
                              "<br>priced theory at α̂ and measured c: ×%{customdata[2]:.2f}<extra></extra>"),
                row=1, col=col)
            fig.add_trace(go.Scatter(
                x=gammas, y=[p["expected_tokens_per_round"] for p in line], mode="lines", name=f"α = {a:g}: eq. 1",
                legendgroup=f"a{a}", showlegend=False, line={"color": colour, "width": 2},
                hovertemplate=f"α = {a:g}, γ = %{{x}}<br>eq. 1: %{{y:.2f}} tokens per round<extra></extra>"),
                row=2, col=col)
            fig.add_trace(go.Scatter(
                x=gammas, y=[p["tokens_per_round"] for p in line], mode="markers", name=f"α = {a:g}: measured",
                legendgroup=f"a{a}", showlegend=False, marker={"color": colour, "size": 9, "line": {"color": "white",
                                                                                                  "width": 1}},
                customdata=[[p["alpha_hat"] or 0, p["expected_tokens_at_alpha_hat"]] for p in line],
                hovertemplate=f"α = {a:g}, γ = %{{x}}<br>measured %{{y:.2f}} tokens per round"
                              "<br>α̂ = %{customdata[0]:.2f}; eq. 1 at α̂: %{customdata[1]:.2f}<extra></extra>"),
                row=2, col=col)
        fig.add_hline(y=1, line={"color": "#9ca3af", "width": 1}, row=1, col=col)
        fig.update_xaxes(title_text="γ (tokens drafted per round)", row=2, col=col)
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(title_text="× ar (tokens/s ratio)", row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text="tokens per round", row=2, col=1, rangemode="tozero")
    fig.update_yaxes(rangemode="tozero")
    # legend entries: one per α (solid: priced theory); the line styles explained in the title
    withheld = sum(bool(p.get("doubt")) for p in points)
    said = f" · {withheld} withheld (× at 0; the table says why)" if withheld else ""
    priced = ("solid Thm 3.8 priced by T(γ+1)/T(1)" if not report["meta"].get("verify_cost_doubt") else
              "no priced line: this machine's T(n) came out impossible (the table says why)")
    return base_layout(fig, f"Theory lab: dots measured · {priced} · dotted Thm 3.8 as written · lower row "
                            f"eq. 1{said}", height=620)
