"""BiLD's views (Kim et al., sections 3.3–3.5, Figures 3, 9 and 10): who wrote each token, where the large
model took over (fallback) and where it rolled the small model back, and the quality/cost sweep.

The token view colours tokens by the model that produced them (the paper's Figure 10 idea: small model
green, large model blue), marks each fallback (▸) and each rollback point m (⟲), and shows the small
model's flushed tokens struck through at the round they were flushed.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..style import FATE_COLOURS, OKABE_ITO, SERIES, TARGET_COLOUR, base_layout, tint
from ..text import inline_html, piece, plot_label
from ...words import plural
from . import MethodView, register, register_note

SMALL_COLOUR = FATE_COLOURS["accepted"]
LARGE_COLOUR = TARGET_COLOUR
FLUSHED_COLOUR = FATE_COLOURS["rejected"]


def _is_bild(trace) -> bool:
    return trace.method == "bild"


def _selected(trace, round_index: int) -> int:
    return max(0, min(int(round_index), len(trace.rounds) - 1))


def bild_tokens_html(trace, round_index: int) -> str:
    """The output up to the selected round, coloured by model, with fallback and rollback markers."""
    last = _selected(trace, round_index)
    parts = []
    for r in trace.rounds[: last + 1]:
        current = " bild-current" if r.index == last else ""
        rb = r.detail.get("rollback")
        for j, (token, kind) in enumerate(zip(r.emitted, r.emitted_kind)):
            if rb and j == rb["position"]:
                flushed = "".join(inline_html(piece(trace, t)) for t in r.drafted[j:])
                mark = f"rollback at m = {j}: −log p_L = {rb['distance']:.2f} > α_RB = {r.detail['rollback_threshold']}"
                gone = f"flushed in round {r.index + 1}: {plural(rb['flushed'], 'small-model token')}"
                parts.append(f'<span class="bild-mark" data-tip="{html.escape(mark)}">⟲</span>'
                             f'<s class="bild-flushed{current}" data-round="{r.index}" data-tip="{html.escape(gone)}">'
                             f'{flushed}</s>')
            small = kind == "accepted"
            if not small and r.detail.get("reason") == "confidence" and not rb:
                why = (f"fallback: the small model's max probability {r.detail['small_max_prob']:.2f} < "
                       f"α_FB = {r.detail['fallback_threshold']}")
                parts.append(f'<span class="bild-mark" data-tip="{html.escape(why)}">▸</span>')
            who = "small" if small else "large"
            title = f"{who} model · round {r.index + 1} · p_L = {r.p_emitted[j]:.3f}"
            if small:
                title += f" · q_S = {r.q_drafted[j]:.3f}"
            parts.append(f'<span class="bild-tok bild-{who}{current}" data-round="{r.index}" '
                         f'data-tip="{html.escape(title)}">{inline_html(piece(trace, token))}</span>')
    small = sum(k == "accepted" for r in trace.rounds[: last + 1] for k in r.emitted_kind)
    total = sum(len(r.emitted) for r in trace.rounds[: last + 1])
    legend = (f'<div class="bild-legend"><span class="bild-tok bild-small">small model</span> '
              f'<span class="bild-tok bild-large">large model</span> '
              f'<s class="bild-flushed">rolled back</s> ▸ fallback ⟲ rollback point · '
              f'{small} of {total} tokens by the small model so far</div>')
    return f"<style>{BILD_CSS}</style>{legend}<div class='bild-text'>{''.join(parts)}</div>"


def bild_events_figure(trace, round_index: int):
    """Per round: the small model's confidence at the hand-over against α_FB, and the rollback
    distance −log p_L(y_m) against α_RB."""
    rounds = trace.rounds
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=("Fallback: small model's max probability when it stopped",
                                        "Rollback: −log p_L of the rolled-back small token"))
    xs = [r.index + 1 for r in rounds if r.detail.get("small_max_prob") is not None]
    ys = [r.detail["small_max_prob"] for r in rounds if r.detail.get("small_max_prob") is not None]
    reasons = [r.detail["reason"] for r in rounds if r.detail.get("small_max_prob") is not None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name="small model's max p", marker={"color": SMALL_COLOUR},
                             customdata=reasons,
                             hovertemplate="round %{x}<br>max p_S = %{y:.3f}<br>hand-over: %{customdata}<extra></extra>"),
                  row=1, col=1)
    fb = trace.settings.options.get("fallback_threshold")
    if fb is not None:
        fig.add_hline(y=fb, line={"dash": "dash", "color": "#111827"}, row=1, col=1,
                      annotation_text=f"α_FB = {fb}", annotation_position="top left")
    rb_rounds = [r for r in rounds if r.detail.get("rollback")]
    fig.add_trace(go.Scatter(
        x=[r.index + 1 for r in rb_rounds], y=[r.detail["rollback"]["distance"] for r in rb_rounds],
        mode="markers", name="rollback: the large model's surprise at the small one's token, −log p_L (nats)",
        marker={"color": FLUSHED_COLOUR, "symbol": "x", "size": 9},
        customdata=[[plot_label(trace, r.detail["rollback"]["replaced"]),
                     plot_label(trace, r.detail["rollback"]["replacement"]),
                     plural(r.detail["rollback"]["flushed"], "token")] for r in rb_rounds],
        hovertemplate="round %{x}<br>−log p_L = %{y:.2f} nats<br>%{customdata[0]} → %{customdata[1]}"
                      "<br>%{customdata[2]} flushed<extra></extra>"), row=2, col=1)
    rbt = trace.settings.options.get("rollback_threshold")
    if rbt is not None:
        fig.add_hline(y=rbt, line={"dash": "dash", "color": "#111827"}, row=2, col=1,
                      annotation_text=f"α_RB = {rbt}", annotation_position="top left")
    selected = _selected(trace, round_index) + 1
    for row in (1, 2):
        fig.add_vline(x=selected, line={"color": "#6b7280", "dash": "dot", "width": 1}, row=row, col=1)
    fig.update_yaxes(title_text="probability", range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(title_text="−log p_L (nats)", rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title_text="round", row=2, col=1)
    return base_layout(fig, "BiLD hand-overs: fallback and rollback per round", height=460)


SYMBOLS = ("circle-open", "square-open", "diamond-open", "triangle-up-open", "x-open", "star-open", "hexagon-open")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def sweep_figure(report: dict) -> go.Figure:
    """The BiLD paper's Figure 9 on this model: agreement with the large model against large-model
    forwards per token, one curve per α_RB (points along it: α_FB), the Pareto front highlighted."""
    points = report["points"]
    fig = go.Figure()
    # the front first, as a wide light band: the curves stay visible on top of it
    front = sorted((p for p in points if p["pareto"]), key=lambda p: p["large_forwards_per_token"])
    fig.add_trace(go.Scatter(x=[p["large_forwards_per_token"] for p in front], y=[p["agreement"] for p in front],
                             mode="lines", name="Pareto front", line={"color": tint("#111827", 0.18), "width": 14},
                             hovertemplate="Pareto front<br>large forwards / token = %{x:.2f}<br>agreement = %{y:.2f}"
                                           "<extra></extra>"))
    rollbacks = sorted({p["rollback_threshold"] for p in points}, key=lambda v: float("inf") if v is None else v)
    for i, rb in enumerate(rollbacks):
        line = sorted((p for p in points if p["rollback_threshold"] == rb), key=lambda p: p["fallback_threshold"])
        name = "α_RB = ∞ (no rollback)" if rb is None else f"α_RB = {rb:g}"
        # curves that coincide stay told apart: own colour, open marker shape and dash per α_RB
        fig.add_trace(go.Scatter(
            x=[p["large_forwards_per_token"] for p in line], y=[p["agreement"] for p in line],
            mode="lines+markers", name=name,
            line={"color": SERIES[i % len(SERIES)], "width": 2, "dash": DASHES[i % len(DASHES)]},
            marker={"size": [7 + 12 * p["fallback_threshold"] for p in line], "symbol": SYMBOLS[i % len(SYMBOLS)],
                    "line": {"width": 2, "color": SERIES[i % len(SERIES)]}},
            customdata=[[p["fallback_threshold"], p["rouge_l"], p["speedup_vs_ar"]] for p in line],
            hovertemplate=f"{name}<br>α_FB = %{{customdata[0]}}<br>large forwards / token = %{{x:.2f}}"
                          "<br>agreement = %{y:.2f}<br>ROUGE-L = %{customdata[1]:.2f}"
                          "<br>%{customdata[2]:.2f}× ar<extra></extra>"))
    fig.update_xaxes(title_text="large-model forwards per token (cost)")
    fig.update_yaxes(title_text="token agreement with the large model (quality)", range=[0, 1.05])
    return base_layout(fig, "BiLD trade-off: quality against cost (marker size: α_FB)", height=420)


BILD_CSS = f"""
.bild-text {{ font-family: ui-monospace, monospace; white-space: pre-wrap; line-height: 1.9; font-size: 14px; }}
.bild-tok {{ border-radius: 3px; padding: 1px 0; color: #111827; }}
.bild-small {{ background: {tint(FATE_COLOURS["accepted"], 0.22)}; }}
.bild-large {{ background: {tint(TARGET_COLOUR, 0.18)}; }}
.bild-flushed {{ background: {tint(FATE_COLOURS["rejected"], 0.2)}; text-decoration: line-through; }}
.bild-current {{ outline: 2px solid #111827; }}
.bild-mark {{ color: {OKABE_ITO["vermillion"]}; font-weight: 700; margin: 0 1px; }}
.bild-legend {{ font-size: 13px; margin-bottom: 6px; }}
"""

register(MethodView(name="bild-tokens", title="BiLD: who wrote each token", applies=_is_bild,
                    render=bild_tokens_html, kind="html",
                    description="Tokens coloured by the model that produced them; rollbacks struck through."))
register(MethodView(name="bild-events", title="BiLD: fallback and rollback", applies=_is_bild,
                    render=bild_events_figure,
                    description="The small model's confidence at each hand-over and each rollback's distance."))
register_note("bild", "BiLD is lossy: the small model writes and the large model only steps in on a fallback or "
                      "a rollback, so the output can differ from the large model's own. The agreement with the "
                      "large model's output is measured against the autoregressive baseline run.")
