"""The benchmark's "Compare" view: each system's measured speed-up over HF ``generate`` (or our ``ar``)
beside what Leviathan et al.'s Theorem 3.8 predicts from its measured α and c, and the same theorem with
the measured verify cost T(γ+1)/T(1) in place of one step.

A report may be a stranger's upload (``reports.load_bench_report`` checks its values): every row has
``system``, ``tokens_per_s`` and ``speedup_vs_ar``; any other key may be absent.

A measured speed-up that is not a fact (``reports.row_doubt``: its runs met another pace than the baseline's, or a
lossless row beat plain decoding by more than its tokens per target forward allow) gets no bar: a "withheld" mark
at 0 says why when pointed at, and the table under the figure says it in words."""

from __future__ import annotations

import textwrap

import plotly.graph_objects as go

from ..reports import row_doubt
from ..words import plural
from .text import plotly_text
from .style import BASELINE_COLOUR, DRAFT_COLOUR, RUN_COLOUR, base_layout


def system_label(name: str) -> str:
    """A system's name as a bar's label: as typed, never as markup (``plotly_text``: a stranger's upload) and
    broken after its method where it is long, so a phone's narrow figure keeps room for the bars."""
    method, colon, rest = name.partition(":")
    return plotly_text(name) if len(name) <= 20 or not rest else f"{plotly_text(method)}:<br>{plotly_text(rest)}"


def compare_figure(report: dict, against: str = "ar") -> go.Figure:
    """Grouped bars per system, across (names read on any width): measured, Theorem 3.8, Theorem 3.8
    with T(k); a line at 1×. A prediction no row has is left out, legend entry and all."""
    key = "speedup_vs_ar" if against == "ar" else "speedup_vs_hf"
    baseline = "our ar" if against == "ar" else "HF generate"
    rows = [r for r in report["rows"] if r.get(key) is not None]
    names = [system_label(r["system"]) for r in rows]
    by_name = {r["system"]: r for r in report["rows"]}
    doubts = [row_doubt(r, by_name.get("ar" if against == "ar" else "hf-generate"), key) for r in rows]
    fig = go.Figure()
    fig.add_trace(go.Bar(
        y=names, x=[None if why else r[key] for r, why in zip(rows, doubts)], name="measured", marker_color=RUN_COLOUR,
        orientation="h",
        customdata=[[r["tokens_per_s"], r.get("tokens_per_s_min"), r.get("tokens_per_s_max"), r.get("identical_to_ar")]
                    for r in rows],
        hovertemplate="%{y}<br>%{x:.2f}× " + baseline + "<br>%{customdata[0]:.1f} tok/s "
                      "(%{customdata[1]:.1f}–%{customdata[2]:.1f})<br>identical to ar: %{customdata[3]}<extra></extra>"))
    if any(doubts):
        withheld = [(name, why) for name, why in zip(names, doubts) if why]
        fig.add_trace(go.Scatter(
            y=[name for name, _ in withheld], x=[0] * len(withheld), mode="markers+text", text=["withheld"] * len(withheld),
            textposition="middle right", name="measured: withheld (not a fair measurement)",
            marker={"symbol": "x-thin-open", "size": 12, "color": RUN_COLOUR, "line": {"width": 2}},
            customdata=[["<br>".join(textwrap.wrap(plotly_text(why), 60))] for _, why in withheld],
            hovertemplate="%{y}<br>measured speed-up withheld: %{customdata[0]}<extra></extra>"))
    # the theory predicts against autoregressive decoding, i.e. our ar
    scale = {r["system"]: (1.0 if against == "ar" else r[key] / r["speedup_vs_ar"]) for r in rows}
    for field, label, colour in (("predicted_speedup", "Theorem 3.8 (verify = 1 step)", BASELINE_COLOUR),
                                 ("predicted_speedup_verify_cost", "Theorem 3.8 with measured T(γ+1)/T(1)", DRAFT_COLOUR)):
        if all(r.get(field) is None for r in rows):
            continue
        fig.add_trace(go.Bar(
            y=names, x=[r.get(field) * scale[r["system"]] if r.get(field) is not None else None for r in rows],
            name=label, marker_color=colour, opacity=0.75, orientation="h",
            customdata=[[r.get("alpha_hat"), r.get("c")] for r in rows],
            hovertemplate="%{y}<br>" + label + ": %{x:.2f}×<br>α = %{customdata[0]:.2f}, c = %{customdata[1]:.2f}"
                          "<extra></extra>"))
    fig.add_vline(x=1.0, line={"color": "#111827", "dash": "dash", "width": 1},
                  annotation_text=f"1× = {baseline}", annotation_position="top")
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="system", autorange="reversed")  # the report's first row on top
    fig.update_xaxes(title_text=f"speed-up over {baseline} (×)", rangemode="tozero")
    meta = report.get("meta") or {}
    counts = (f", {plural(meta['prompts'], 'prompt')} × {plural(meta['repeats'], 'repeat')}"
              if meta.get("prompts") and meta.get("repeats") else "")
    title = f"Speed-up over {baseline}: measured vs predicted · {plotly_text(meta.get('model') or '')}{counts}"
    return base_layout(fig, title, height=max(440, 150 + 22 * len(rows) * len(fig.data)))
