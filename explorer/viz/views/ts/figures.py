"""The Thompson-sampling views' figures (EESD section 3.3, Algorithm 1): the posterior of θ over rounds with the
draft lengths it produced, the selected round's decisions step by step, and calibrated TS's μ between the model's
θ_M and the observed θ̂. What each round drew θ from is read by ``posteriors``."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ....words import ordinal
from ...style import DRAFT_COLOUR, FATE_COLOURS, OKABE_ITO, base_layout, empty_figure
from ...text import plot_label
from .. import drawn_rounds
from .posteriors import BINS, GRID, first_value, floats, is_cali, round_posterior, selected_round, step_fates, ts_kind

MEAN_COLOUR = "#111827"
MODEL_COLOUR = OKABE_ITO["purple"]  # θ_M, the calibration model's prediction (eq. 5)
HAT_COLOUR = FATE_COLOURS["accepted"]  # θ̂, the observed continue rate (eq. 10)
CONTINUE_COLOUR = OKABE_ITO["sky"]  # χ = 1
SELECTED = {"color": "#6b7280", "dash": "dot", "width": 1.5}
MAX_THETA_MARKS = 2000  # sampled θ drawn at most; past it every k-th round's (and the selected one's)


def posterior_figure(trace, round_index: int) -> go.Figure:
    """The posterior of θ round by round (a density heatmap, θ on y), its mean and every sampled θ; below
    it, the draft length those samples produced and how much of it was accepted.

    beta-ts: Beta(α_before, β_before) of each round (eq. 2), mean α/(α + β); it narrows as eq. 3–4 add
    each verification's r and n − r. cali-ts: N(μ, σ²) of each round's first draft step (eq. 6–7, 9),
    mean μ; σ shrinks as n grows (eq. 7)."""
    kind = ts_kind(trace)
    title = ("Thompson sampling: posterior of θ per round"
             + (" (Beta-TS, eq. 2–4)" if kind == "beta-ts" else " (calibrated TS, eq. 6–9)"))
    if not trace.rounds or kind is None:
        return empty_figure(title, "No Thompson-sampling rounds in this trace.")
    posteriors = [round_posterior(r, kind) for r in trace.rounds]
    if all(p is None for p in posteriors):
        return empty_figure(title, "No round drafted, so the controller never sampled θ: nothing to show.")
    xs = [r.index + 1 for r in trace.rounds]
    selected = selected_round(trace, round_index)
    # at most MAX_ROUNDS_DRAWN rounds' densities and bars (every k-th, and the selected one): 4 096 columns
    # made a 2.9 MB figure that the browser redrew at every step
    columns, every = drawn_rounds(len(xs), selected)
    z = np.full((BINS, len(columns)), np.nan, dtype=np.float32)  # (θ bins, rounds drawn)
    for k, j in enumerate(columns):
        if posteriors[j] is not None:
            z[:, k] = posteriors[j][0]
    finite = z[np.isfinite(z)]
    zmax = float(np.percentile(finite, 99.5)) if finite.size else 1.0

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.64, 0.36], vertical_spacing=0.14,
                        subplot_titles=("Posterior density of θ = P(draft one more token) at the start of each round",
                                        "Draft length the samples produced, and what the target accepted"))
    domain = fig.layout.yaxis.domain
    fig.add_trace(go.Heatmap(
        x=[xs[j] for j in columns], y=GRID, z=z, zmin=0, zmax=max(zmax, 1e-6), colorscale="Blues", name="posterior density",
        colorbar={"title": {"text": "density<br>p(θ)"}, "len": domain[1] - domain[0], "y": sum(domain) / 2,
                  "yanchor": "middle", "thickness": 12},
        hovertemplate="round %{x}<br>θ = %{y:.2f}<br>density p(θ) = %{z:.2f}<extra></extra>"), row=1, col=1)
    sx, sy, text = [], [], []
    every = sum(len(r.controller.get("theta") or ()) for r in trace.rounds)
    stride = max(1, -(-every // MAX_THETA_MARKS))  # a legal trace held 266 000 θ: 320 000 SVG points, 45 s a step
    for r in trace.rounds:
        if r.index % stride and r.index != selected:
            continue
        thetas, cont = floats(r.controller.get("theta")), list(r.controller.get("continue") or ())
        for i, t in enumerate(thetas):
            sx.append(r.index + 1)
            sy.append(min(1.0, max(0.0, t)))
            go_on = cont[i] if i < len(cont) else None
            text.append(f"step {i + 1}: θ = {t:.3f} → "
                        + ("χ = 1, continue" if go_on else "χ = 0, stop" if go_on is False else "χ not recorded"))
    if sx:
        fig.add_trace(go.Scatter(
            x=sx, y=sy, customdata=text, mode="markers",
            name="sampled θ (one per draft step)" if stride == 1 else
                 f"sampled θ (one per draft step; every {ordinal(stride)} round of {len(trace.rounds)} shown)",
            marker={"color": DRAFT_COLOUR, "size": 5, "line": {"color": "#ffffff", "width": 0.5}},
            hovertemplate="round %{x}<br>%{customdata}<extra></extra>"), row=1, col=1)

    means = [posteriors[j][1] if posteriors[j] is not None else None for j in columns]
    desc = [posteriors[j][2] if posteriors[j] is not None else "no draft step: no posterior sampled" for j in columns]
    shown_x = [xs[j] for j in columns]
    mean_name = "posterior mean α/(α + β)" if kind == "beta-ts" else "posterior mean μ (first draft step)"
    fig.add_trace(go.Scatter(
        x=shown_x, y=means, customdata=desc, name=mean_name, mode="lines+markers", connectgaps=False,
        line={"color": MEAN_COLOUR, "width": 2}, marker={"size": 6},
        hovertemplate="round %{x}<br>mean θ = %{y:.3f}<br>%{customdata}<extra></extra>"), row=1, col=1)
    drafted = [len(trace.rounds[j].drafted) for j in columns]
    accepted = [trace.rounds[j].n_accepted for j in columns]
    fig.add_trace(go.Bar(x=shown_x, y=drafted, name="drafted tokens (realised draft length)", marker_color=DRAFT_COLOUR,
                         opacity=0.6, hovertemplate="round %{x}<br>drafted %{y} tokens<extra></extra>"), row=2, col=1)
    fig.add_trace(go.Bar(x=shown_x, y=accepted, name="accepted drafts", marker_color=FATE_COLOURS["accepted"],
                         hovertemplate="round %{x}<br>accepted %{y} drafts<extra></extra>"), row=2, col=1)
    gamma = getattr(trace.settings, "gamma", None)
    if gamma:
        fig.add_hline(y=gamma, line={"color": MEAN_COLOUR, "dash": "dash", "width": 1}, row=2, col=1,
                      annotation_text=f"γ cap = {gamma}", annotation_position="top left")
    _mark_selected(fig, xs, selected)
    fig.update_layout(barmode="overlay")
    fig.update_yaxes(title_text="θ (probability)", range=[0, 1], row=1, col=1)
    fig.update_yaxes(title_text="tokens", rangemode="tozero", row=2, col=1)
    _round_axes(fig, xs)
    if every > 1:
        title += f" · every {ordinal(every)} of {len(xs)} rounds drawn"
    base_layout(fig, f"{title} · selected: round {selected + 1}", height=560)
    fig.update_layout(margin={"r": 90})
    return fig


def decisions_figure(trace, round_index: int) -> go.Figure:
    """The selected round step by step: the θ sampled at each draft step (Algorithm 1, step 8), the
    posterior mean it was drawn around, the Bernoulli decision χ (step 9: continue or stop) and the
    fate of the token drafted at that step once the target verified it."""
    kind = ts_kind(trace)
    if not trace.rounds or kind is None:
        return empty_figure("Thompson sampling: decisions per draft step", "No Thompson-sampling rounds in this trace.")
    r = trace.rounds[selected_round(trace, round_index)]
    c = r.controller
    thetas, cont = floats(c.get("theta")), list(c.get("continue") or ())
    title = f"Round {r.index + 1}: θ sampled and the stop decision at each draft step"
    if not thetas:
        why = "drafted nothing" if not r.drafted else "recorded no θ"
        return empty_figure(title, f"Round {r.index + 1} {why} (event: {r.event}): the controller sampled no θ, "
                                   "so there is no decision to show.")
    steps = list(range(1, len(thetas) + 1))
    fates = step_fates(r)
    fates += ["not drafted"] * (len(thetas) - len(fates))
    tokens = [plot_label(trace, t) for t in r.drafted] + ["—"] * (len(thetas) - len(r.drafted))
    priced = c.get("priced") is True  # beta-ts-priced / cali-ts-priced: θ decides through the measured costs
    go_text, stop_text = (("continue: a longer draft pays at θ", "stop: no longer draft pays at θ") if priced
                          else ("continue (χ = 1)", "stop (χ = 0)"))
    decisions = [(go_text if cont[i] else stop_text) if i < len(cont) else "not recorded" for i in range(len(thetas))]
    fig = go.Figure()
    for fate in ("accepted", "rejected", "discarded", "not drafted"):
        idx = [i for i, f in enumerate(fates) if f == fate]
        if not idx:
            continue
        fig.add_trace(go.Bar(
            x=[steps[i] for i in idx], y=[thetas[i] for i in idx], name=f"sampled θ · token {fate}",
            marker_color=FATE_COLOURS.get(fate, "#d1d5db"), width=0.6,
            customdata=[[tokens[i], decisions[i], fate] for i in idx],
            hovertemplate="step %{x}<br>θ = %{y:.3f}<br>%{customdata[1]}<br>drafted %{customdata[0]}: "
                          "%{customdata[2]}<extra></extra>"))
    lo, hi = 0.5, len(thetas) + 0.5
    if kind == "beta-ts":
        a, b = c.get("alpha_before"), c.get("beta_before")
        if a is not None and b is not None and a + b > 0:
            mean = a / (a + b)
            fig.add_trace(go.Scatter(
                x=[lo, hi], y=[mean, mean], mode="lines", name=f"posterior mean α/(α + β) = {mean:.3f}",
                line={"color": MEAN_COLOUR, "width": 2, "dash": "dash"},
                hovertemplate=f"Beta(α = {a:.2f}, β = {b:.2f})<br>mean = {mean:.3f}<extra></extra>"))
        subtitle = (f"what it believes of acceptance: Beta({_num(a)}, {_num(b)}) → Beta({_num(c.get('alpha_after'))}, "
                    f"{_num(c.get('beta_after'))}) after {c.get('r', '?')} of {c.get('n', '?')} draft steps went right (r of n, "
                    "eq. 3–4)")
    else:
        mu, sigma, model = floats(c.get("mu")), floats(c.get("sigma")), floats(c.get("theta_model"))
        if mu:
            fig.add_trace(go.Scatter(
                x=steps[: len(mu)], y=mu, mode="lines+markers", name="posterior mean μ ± σ (eq. 6–7)",
                line={"color": MEAN_COLOUR, "width": 2, "dash": "dash"},
                error_y={"type": "data", "array": sigma[: len(mu)], "visible": bool(sigma), "color": MEAN_COLOUR},
                hovertemplate="step %{x}<br>μ = %{y:.3f}<extra></extra>"))
        if model:
            fig.add_trace(go.Scatter(
                x=steps[: len(model)], y=model, mode="markers", name="θ_M, the model's prediction (eq. 5)",
                marker={"color": MODEL_COLOUR, "symbol": "diamond", "size": 9},
                hovertemplate="step %{x}<br>θ_M = %{y:.3f}<extra></extra>"))
        subtitle = (f"how often drafting went on so far: {_num(c.get('theta_hat'), 3)} → "
                    f"{_num(c.get('theta_hat_after'), 3)} (θ̂, eq. 10), over {c.get('n', '?')} verifications before "
                    "this round")
    if priced:
        ratios = ", ".join(_num(x) for x in (c.get("verify_ratio") or [])[:4] if isinstance(x, (int, float)))
        subtitle += (f"</sup><br><sup>weighed against its cost: drafted on while one more token paid at the sampled "
                     f"θ (a draft step {_num(c.get('c'))} of a target step, c; checking k+1 tokens {ratios or '?'}, … "
                     "times one, T(k+1)/T(1))")
    # decision markers in colours no fate uses here, so they do not read as token fates
    for go_on, name, symbol, colour in ((True, f"{go_text if priced else 'continue drafting (χ = 1)'}",
                                         "triangle-right", CONTINUE_COLOUR),
                                        (False, f"{stop_text if priced else 'stop drafting (χ = 0)'}", "x", MEAN_COLOUR)):
        idx = [i for i in range(min(len(cont), len(thetas))) if bool(cont[i]) is go_on]
        if idx:
            fig.add_trace(go.Scatter(
                x=[steps[i] for i in idx], y=[1.1] * len(idx), mode="markers+text", name=name,
                text=["continue" if go_on else "stop"] * len(idx), textposition="top center",
                marker={"symbol": symbol, "size": 12, "color": colour},
                customdata=[thetas[i] for i in idx],
                hovertemplate="step %{x}<br>θ = %{customdata:.3f}<br>" + name + "<extra></extra>"))
    summary = f"drafted {len(r.drafted)}, accepted {r.n_accepted}, event {r.event}"
    if cont and len(cont) >= len(thetas) and all(cont[: len(thetas)]):
        gamma = getattr(trace.settings, "gamma", None)
        summary += f" · every step continued: the draft stopped at the {f'γ = {gamma}' if gamma else 'length'} cap"
    fig.update_layout(barmode="overlay", bargap=0.3)
    fig.update_xaxes(title_text="draft step i (position of the drafted token in the round)", dtick=1,
                     range=[lo, hi])
    fig.update_yaxes(title_text="θ (probability of continuing)", range=[0, 1.3],
                     tickvals=[0, 0.2, 0.4, 0.6, 0.8, 1.0])
    base_layout(fig, f"{title}<br><sup>{summary}</sup><br><sup>{subtitle}</sup>", height=420)
    fig.update_layout(margin={"t": 95})
    return fig


def calibration_figure(trace, round_index: int) -> go.Figure:
    """Calibrated TS over rounds: the model's θ_M (eq. 5), the observed rate θ̂ (eq. 10) and the mean μ
    they are mixed into, μ = w·θ_M + (1 − w)·θ̂ with w = σ_S²/(nσ_M² + σ_S²) (eq. 6); the band is μ ± σ
    (eq. 7). Below: w as the trace implies it, (μ − θ̂)/(θ_M − θ̂), falling from 1 towards 0 as n grows.
    Values of each round's first draft step."""
    title = "Calibrated TS: μ moves from the model's θ_M towards the observed θ̂ as n grows (eq. 6)"
    if not trace.rounds or not is_cali(trace):
        return empty_figure(title, "Not a calibrated Thompson-sampling trace.")
    rows = []
    for r in trace.rounds:
        c = r.controller
        mu, sigma, model = first_value(c.get("mu")), first_value(c.get("sigma")), first_value(c.get("theta_model"))
        hat = c.get("theta_hat")
        rows.append((r.index + 1, mu, sigma, model, None if hat is None else float(hat), c.get("n")))
    if all(mu is None for _, mu, *_ in rows):
        return empty_figure(title, "No round drafted, so the controller never computed μ and σ: nothing to show.")
    xs = [row[0] for row in rows]
    mu = [row[1] for row in rows]
    sigma = [row[2] for row in rows]
    model = [row[3] for row in rows]
    hat = [row[4] for row in rows]
    ns = [row[5] for row in rows]
    weight = [(m - h) / (t - h) if None not in (m, h, t) and abs(t - h) >= 0.02 else None
              for m, h, t in zip(mu, hat, model)]
    selected = selected_round(trace, round_index)

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.66, 0.34], vertical_spacing=0.1,
                        subplot_titles=("θ_M, θ̂ and the posterior N(μ, σ²) of each round's first draft step",
                                        "Weight of the model in μ: w = σ_S²/(nσ_M² + σ_S²)"))
    band = [(x, m, s) for x, m, s in zip(xs, mu, sigma) if m is not None and s is not None]
    fig.add_trace(go.Scatter(  # one closed polygon: μ + σ left to right, then μ − σ back
        x=[x for x, _, _ in band] + [x for x, _, _ in reversed(band)],
        y=[m + s for _, m, s in band] + [m - s for _, m, s in reversed(band)],
        mode="lines", line={"width": 0}, fill="toself", fillcolor="rgba(17, 24, 39, 0.12)", name="μ ± σ (eq. 7)",
        hoverinfo="skip", legendrank=2), row=1, col=1)
    custom = [[s if s is not None else float("nan"), n if n is not None else "?"] for s, n in zip(sigma, ns)]
    fig.add_trace(go.Scatter(x=xs, y=mu, customdata=custom, mode="lines+markers", name="μ, posterior mean (eq. 6)",
                             line={"color": MEAN_COLOUR, "width": 2}, marker={"size": 5}, legendrank=1,
                             error_y={"type": "data", "array": [c[0] for c in custom], "visible": len(band) < 2,
                                      "color": MEAN_COLOUR},  # a band needs two rounds; one gets a bar
                             hovertemplate="round %{x}<br>μ = %{y:.3f}<br>σ = %{customdata[0]:.3f}"
                                           "<br>n = %{customdata[1]}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=xs, y=model, mode="markers", name="θ_M, model's prediction (eq. 5)",
                             marker={"color": MODEL_COLOUR, "symbol": "diamond", "size": 7}, legendrank=3,
                             hovertemplate="round %{x}<br>θ_M = %{y:.3f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=xs, y=hat, mode="lines+markers", marker={"size": 4}, line_shape="hv",
                             name="θ̂, observed continue rate (eq. 10)",
                             line={"color": HAT_COLOUR, "width": 2, "dash": "dash"}, legendrank=4,
                             hovertemplate="round %{x}<br>θ̂ = %{y:.3f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=xs, y=weight, customdata=[n if n is not None else "?" for n in ns],
                             mode="markers+lines", connectgaps=True,
                             name="w implied by the trace, (μ − θ̂)/(θ_M − θ̂)",
                             line={"color": MODEL_COLOUR, "width": 1.5}, marker={"size": 5}, legendrank=5,
                             hovertemplate="round %{x}<br>n = %{customdata}<br>w = %{y:.3f} "
                                           "(1: μ = θ_M, 0: μ = θ̂)<extra></extra>"), row=2, col=1)
    _mark_selected(fig, xs, selected)
    fig.update_yaxes(title_text="θ (probability)", range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(title_text="w (share of θ_M)", range=[-0.05, 1.1], row=2, col=1)
    _round_axes(fig, xs)
    return base_layout(fig, f"{title} · selected: round {selected + 1}", height=520)


def _mark_selected(fig: go.Figure, xs: list[int], selected: int) -> None:
    """A dotted line through the selected round in both rows (none when there is only that round)."""
    if len(xs) > 1:
        for row in (1, 2):
            fig.add_vline(x=selected + 1, line=SELECTED, row=row, col=1)


def _round_axes(fig: go.Figure, xs: list[int]) -> None:
    """Both rows' x: whole rounds, each round a unit-wide column (so one round is not drawn at 0.6–1.4)."""
    ticks = {"dtick": 1} if len(xs) <= 20 else {}
    fig.update_xaxes(range=[xs[0] - 0.5, xs[-1] + 0.5], **ticks)
    fig.update_xaxes(title_text="round", row=2, col=1)


def _num(value, digits: int = 2) -> str:
    return "?" if value is None else f"{float(value):.{digits}f}"
