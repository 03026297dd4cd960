"""Latency: where each round's time went, and this run's throughput against autoregressive decoding.

Left: per-round stacked time (draft, verify, other: the split of the paper's cost model, where a round
costs γ draft forwards plus one target forward). Right: cumulative tokens/s after each round for this
run and for the autoregressive baseline on the same prompt and sampling settings; their ratio at the end
is the measured speedup (``trust.measured_speedup``: shown only where the machine kept its pace).
"""

from __future__ import annotations

import itertools

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .text import plotly_text
from .trust import measured_speedup, speedup_doubt
from .style import BASELINE_COLOUR, FATE_COLOURS, RUN_COLOUR, TIMING_COLOURS, base_layout, empty_figure
from .writer import writer

TITLE = "Latency"


def cumulative_throughput(trace) -> tuple[list[int], list[float]]:
    """(tokens so far, tokens/s so far) after each round, from the rounds' own timings."""
    tokens = list(itertools.accumulate(len(r.emitted) for r in trace.rounds))
    seconds = list(itertools.accumulate(r.timing.total_s for r in trace.rounds))
    return tokens, [n / s if s > 0 else 0.0 for n, s in zip(tokens, seconds)]


def latency_figure(trace, baseline=None) -> go.Figure:
    """Per-round stacked time and cumulative throughput (with the baseline when there is one)."""
    if trace is None or not trace.rounds:
        return empty_figure(TITLE, "Run a prompt to see where the time goes.")
    fig = make_subplots(rows=1, cols=2, column_widths=[0.55, 0.45], horizontal_spacing=0.1,
                        subplot_titles=["Time per round (stacked)", "Cumulative throughput"])
    rounds = [r.index + 1 for r in trace.rounds]
    tokens = [len(r.emitted) for r in trace.rounds]
    who = writer(trace)
    # the copy alone's step is recorded where a target's pass would be: name it for what it is
    names = {"draft": "draft", "verify": "verify", "other": "other"} if who.checked else \
        {"draft": "draft", "verify": f"{who.short} step", "other": "other"}
    colours = TIMING_COLOURS if who.checked else {**TIMING_COLOURS, "verify": FATE_COLOURS["copy"]}
    for part in ("draft", "verify", "other"):
        ms = [getattr(r.timing, f"{part}_s") * 1000 for r in trace.rounds]
        if not who.checked and part == "draft":
            continue  # nothing drafts
        fig.add_trace(go.Bar(
            x=rounds, y=ms, name=f"{names[part]} (ms)", marker_color=colours[part], legendgroup=part,
            customdata=tokens,
            hovertemplate=f"round %{{x}}<br>{names[part]}: %{{y:.1f}} ms<br>tokens emitted: %{{customdata}}<extra></extra>",
        ), row=1, col=1)
    label = plotly_text(trace.method + (f" ({trace.draft})" if trace.draft else "")
                        + ("" if who.checked else f": {who.name} alone, lossy"))
    x, y = cumulative_throughput(trace)
    fig.add_trace(go.Scatter(
        x=x, y=y, mode="lines+markers", name=f"this run: {label}", line={"color": RUN_COLOUR, "width": 2.5},
        marker={"size": 4}, hovertemplate="after %{x} tokens: %{y:.1f} tokens/s<extra>this run</extra>",
    ), row=1, col=2)
    if baseline is not None and baseline.rounds:
        bx, by = cumulative_throughput(baseline)
        timed_apart = speedup_doubt(trace, baseline) is not None  # drawn, but not as a fair comparison
        fig.add_trace(go.Scatter(
            x=bx, y=by, mode="lines", line={"color": BASELINE_COLOUR, "dash": "dash"},
            name="autoregressive baseline" + (" (timed at another pace: not comparable)" if timed_apart else ""),
            hovertemplate="after %{x} tokens: %{y:.1f} tokens/s<extra>autoregressive</extra>",
        ), row=1, col=2)
    fig.update_layout(barmode="stack", bargap=0.15)
    fig.update_xaxes(title_text="round", row=1, col=1)
    fig.update_yaxes(title_text="time (ms)", row=1, col=1)
    fig.update_xaxes(title_text="tokens generated", row=1, col=2)
    fig.update_yaxes(title_text="throughput (tokens/s)", rangemode="tozero", row=1, col=2)
    return base_layout(fig, _title(trace, baseline), height=400)


def _title(trace, baseline) -> str:
    s = trace.summary
    ours = f"{s.tokens_per_s:.1f} tokens/s" if s.tokens_per_s else "–"
    speedup = measured_speedup(trace, baseline)
    if trace.method == "ar":
        return f"{TITLE}: autoregressive {ours} over {s.new_tokens} tokens"
    if speedup is None and speedup_doubt(trace, baseline) is not None:
        return f"{TITLE}: this run {ours}; its speed-up is unreliable (the machine's pace changed: see Why this speed)"
    if speedup is None:
        return f"{TITLE}: this run {ours} (autoregressive baseline not measured yet)"
    return (f"{TITLE}: this run {ours} vs autoregressive {baseline.summary.tokens_per_s:.1f} tokens/s "
            f"→ measured speedup ×{speedup:.2f}")
