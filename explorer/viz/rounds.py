"""Round detail: p (target) and q (draft) side by side at every drafted position of one round.

Leviathan et al., Algorithm 1: draft x_i ~ q_i, accept it when r_i ≤ p_i(x_i) / q_i(x_i); at the first
rejection draw the correction from the residual p' = norm(max(0, p − q)); after γ acceptances draw a
bonus token from p at position γ + 1. The figure has one panel per drafted position (the drafted token
and the top alternatives of either model) and a last panel for the target's own token: the residual it
was drawn from, or p where it came from the target directly.

The trace keeps the top 5 of each distribution, so a model's probability of a token outside its top 5
is unknown; such bars are drawn at 0 and their hover says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import DRAFT_COLOUR, FATE_COLOURS, RESIDUAL_COLOUR, TARGET_COLOUR, base_layout, empty_figure
from .text import plot_label
from .tokens import round_fates
from .writer import writer

MAX_CANDIDATES = 6
MIN_SHOWN_PROB = 1e-3  # a one-hot q (prompt lookup) lists zero-probability ids in its top 5: leave them out
SERIES = {  # name in the legend → colour
    "q (draft)": DRAFT_COLOUR,
    "p (target)": TARGET_COLOUR,
    "residual norm(max(0, p − q))": RESIDUAL_COLOUR,
}
MARK = {"accepted": "✓", "rejected": "✗", "discarded": "–", "corrected": "↻", "bonus": "+", "target": "●", "copy": "●"}
# a panel's title longer than this many characters goes on two lines: three panels a row leave a title ≈ 250 px
# before it reaches its neighbour's, and at 12 px "target at #4 (greedy: its argmax) → ' Australia' ↻" ran into
# "draft #7 ' London' – discarded" beside it at 1400 px (CI, 2026-11-28)
TITLE_CHARS = 30


@dataclass
class Panel:
    """One subplot: a title, the candidate tokens (the chosen one first) and each series' values."""

    title: str
    chosen: int
    candidates: list[int] = field(default_factory=list)
    series: dict[str, dict[int, float]] = field(default_factory=dict)


def round_panels(trace, round_index: int) -> list[Panel]:
    """The panels of a round: one per drafted position, then the target's token."""
    r = trace.rounds[round_index]
    who = writer(trace)
    panels = []
    for f in round_fates(r, who.fate):
        if f.position is not None:
            i = f.position
            panels.append(_panel(
                _title(f"draft #{i + 1} {plot_label(trace, f.token_id)}", f"{MARK[f.fate]} {f.fate}"), f.token_id,
                {"q (draft)": _row(r.draft_top, i, {f.token_id: f.q}), "p (target)": _row(r.target_top, i, {f.token_id: f.p})},
            ))
            continue
        j = r.n_accepted  # the verified position the target's token fills
        name = plot_label(trace, f.token_id)
        if f.fate == "corrected" and r.residual_top:
            panels.append(_panel(
                _title(f"residual at #{j + 1}", f"→ {name} {MARK['corrected']} corrected"), f.token_id,
                {"q (draft)": _row(r.draft_top, j, {}), "p (target)": _row(r.target_top, j, {f.token_id: f.p}),
                 "residual norm(max(0, p − q))": dict(r.residual_top)},
                first="residual norm(max(0, p − q))",
            ))
        elif f.fate == "corrected":
            panels.append(_panel(
                _title(f"target at #{j + 1} (greedy: its argmax)", f"→ {name} {MARK['corrected']}"), f.token_id,
                {"q (draft)": _row(r.draft_top, j, {}), "p (target)": _row(r.target_top, j, {f.token_id: f.p})},
            ))
        else:
            where = f"#{j + 1}" if r.drafted else "the next position"
            fate = "its own token, unchecked" if f.fate == "copy" else f.fate
            panels.append(_panel(
                _title(f"{who.short} at {where}", f"→ {name} {MARK[f.fate]} {fate}"), f.token_id,
                {who.symbol: _row(r.target_top, j, {f.token_id: f.p})},
            ))
    return panels


def round_detail_figure(trace, round_index: int) -> go.Figure:
    """The round's panels as one figure (three panels a row)."""
    title = "Round detail: target p vs draft q at each drafted position"
    if trace is None or not trace.rounds:
        return empty_figure(title, "Run a prompt or upload a trace to see a round.")
    index = max(0, min(int(round_index), len(trace.rounds) - 1))
    panels = round_panels(trace, index)
    if not panels:  # e.g. a beam-search round in which the winning beam's ancestor gained nothing
        return empty_figure(f"Round {index + 1} ({trace.rounds[index].event})",
                            "This round added no token to the output and tested no draft: nothing to compare.")
    cols = min(len(panels), 3)
    rows = math.ceil(len(panels) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[p.title for p in panels],
                        horizontal_spacing=0.14, vertical_spacing=min(0.5 / rows, 0.16))
    shown = set()
    for n, panel in enumerate(panels):
        row, col = n // cols + 1, n % cols + 1
        names = _candidate_labels(trace, panel)
        for series, values in panel.series.items():
            x = [values.get(t) for t in panel.candidates]
            fig.add_trace(go.Bar(
                x=[v if v is not None else 0.0 for v in x], y=names, orientation="h", name=series,
                marker_color=SERIES.get(series, FATE_COLOURS["copy"]), legendgroup=series, showlegend=series not in shown,
                customdata=[f"{v:.4f}" if v is not None else "not in its top 5" for v in x],
                hovertemplate=f"%{{y}}<br>{series} = %{{customdata}}<extra></extra>",
            ), row=row, col=col)
            shown.add(series)
        fig.update_xaxes(title_text="probability (0–1)", range=[0, 1.02], row=row, col=col, title_standoff=4)
        fig.update_yaxes(autorange="reversed", row=row, col=col, tickfont={"size": 11},
                         title_text="token" if col == 1 else None)
    for n in range(len(panels), rows * cols):  # the grid's unused cells
        fig.update_xaxes(visible=False, row=n // cols + 1, col=n % cols + 1)
        fig.update_yaxes(visible=False, row=n // cols + 1, col=n % cols + 1)
    r = trace.rounds[index]
    fig.update_layout(barmode="group", bargap=0.25)
    who = writer(trace)
    title = (f"Round {index + 1} ({r.event}): target p vs draft q per position; ▸ marks the token chosen" if who.checked
             else f"Round {index + 1}: {who.name} alone, its p of its top tokens (no draft, no target); ▸ marks its token")
    base_layout(fig, title, height=110 + 235 * rows)
    fig.update_annotations(font_size=12)
    return fig


# -- helpers ----------------------------------------------------------------------------------------


def _title(head: str, tail: str) -> str:
    """A panel's title on one line, or on two (``head``, then ``tail``) where it is longer than ``TITLE_CHARS``."""
    return f"{head}<br>{tail}" if len(f"{head} {tail}") > TITLE_CHARS else f"{head} {tail}"


def _row(tops, i: int, known: dict) -> dict[int, float]:
    """Top-5 probabilities at position ``i`` plus the exactly known values (which take precedence)."""
    values = dict(tops[i]) if i < len(tops) else {}
    values.update({t: v for t, v in known.items() if v is not None})
    return values


def _panel(title: str, chosen: int, series: dict[str, dict[int, float]], first: str | None = None) -> Panel:
    """Candidates: the chosen token, then the others by their largest probability in any series
    (those of the series ``first`` before the rest: a residual panel shows the whole residual top)."""
    best: dict[int, float] = {}
    for values in series.values():
        for token, prob in values.items():
            if prob >= MIN_SHOWN_PROB or token == chosen:
                best[token] = max(best.get(token, 0.0), prob)
    leading = series.get(first, {})
    others = sorted((t for t in best if t != chosen), key=lambda t: (t not in leading, -best[t]))
    return Panel(title, chosen, [chosen] + others[: MAX_CANDIDATES - 1], series)


def _candidate_labels(trace, panel: Panel) -> list[str]:
    """Axis labels; the chosen token gets ▸, and ids disambiguate tokens that print the same."""
    texts = [plot_label(trace, t) for t in panel.candidates]
    labels = []
    for t, text in zip(panel.candidates, texts):
        if texts.count(text) > 1:
            text = f"{text} #{t}"
        labels.append(("▸ " if t == panel.chosen else "") + text)
    return labels
