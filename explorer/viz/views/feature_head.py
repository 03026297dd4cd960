"""The feature-head draft (EAGLE; draft ``feature-head``, method ``eagle``): where its drafts are accepted
and how far its predicted features drift from the target's.

The head drafts in feature space: draft 1 reads the target's own last-layer feature, draft k reads the
head's prediction from draft k − 1. After each verification the round records the cosine between every
predicted feature f̂ and the feature the target computed at that position (``detail.feature_cos``).
Top: by draft position, the share of tested drafts the target accepted and the mean cosine of the
accepted and of the refused drafts — EAGLE's point that a draft goes wrong where its feature drifts. On
the shipped head that is not what separates them (cosine ≈ 0.68 for both, #29); the head's own
confidence q in its token does, so the panel's title says, from the run's numbers, which of the two
tells accepted from refused drafts. Bottom: the selected round, one bar per draft, coloured by its fate.
"""

from __future__ import annotations


import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...trace import acceptance_by_position
from ..style import BASELINE_COLOUR, FATE_COLOURS, FATE_LABELS, base_layout, empty_figure
from ..text import plot_label
from ..tokens import round_fates
from . import MethodView, register

TITLE = "Feature head: acceptance and feature drift by draft position"


def _feature_head(trace) -> bool:
    """Where the rounds carry what this view reads, the cosine of each draft's predicted feature: a linear run
    of the head (``eagle``, ``speculative``). eagle-tree drafts with the head too but records a tree, and offering
    this view there drew "drafted nothing" every round under a legend of lines never drawn (#42 item 3)."""
    return str(trace.draft or "").startswith("feature-head") and any(
        "feature_cos" in (r.detail or {}) for r in trace.rounds)


def separation(rounds) -> dict | None:
    """Accepted against refused drafts over the run (tested ones only): their mean cosine (``cos``) and
    the head's mean confidence q in its token (``q``), by fate, and which of the two tells them apart (a
    gap of 0.05 in cosine, 0.1 in q); None while either group is empty."""
    groups = {True: [], False: []}
    for r in rounds:
        cos = r.detail.get("feature_cos") or ()
        for i in range(min(r.tested, len(r.drafted), len(cos), len(r.q_drafted))):
            groups[i < r.n_accepted].append((cos[i], r.q_drafted[i]))
    if not groups[True] or not groups[False]:
        return None
    (ca, qa), (cr, qr) = ([sum(v) / len(g) for v in zip(*g)] for g in (groups[True], groups[False]))
    verdict = ("feature drift tells them apart" if ca - cr >= 0.05 else
               "confidence tells them apart, not drift" if qa - qr >= 0.1 else "neither tells them apart")
    return {"cos": {True: ca, False: cr}, "q": {True: qa, False: qr}, "verdict": verdict}


def what_separates(rounds) -> str:
    """The run's separation in words ("" while either group is empty)."""
    s = separation(rounds)
    if s is None:
        return ""
    return (f"accepted: cosine {s['cos'][True]:.2f}, q {s['q'][True]:.2f} · refused: cosine {s['cos'][False]:.2f}, "
            f"q {s['q'][False]:.2f} — {s['verdict']}")


def cosine_by_position(rounds) -> tuple[list[float | None], list[float | None]]:
    """Mean cosine at each draft position of the tested drafts the target accepted, and of those it refused."""
    most = max((len(r.drafted) for r in rounds), default=0)
    sums = {True: [0.0] * most, False: [0.0] * most}
    counts = {True: [0] * most, False: [0] * most}
    for r in rounds:
        cos = r.detail.get("feature_cos") or ()
        for i in range(min(r.tested, len(r.drafted), len(cos))):
            kept = i < r.n_accepted
            sums[kept][i] += cos[i]
            counts[kept][i] += 1
    mean = {k: [s / n if n else None for s, n in zip(sums[k], counts[k])] for k in (True, False)}
    return mean[True], mean[False]


def feature_head_figure(trace, round_index: int) -> go.Figure:
    rounds = [r for r in trace.rounds if r.drafted]
    if not rounds:
        return empty_figure(TITLE, "No round drafted yet (the first round never does: the head needs the "
                                   "target's features from a first forward).")
    tested, accepted = acceptance_by_position(rounds)
    positions = list(range(1, len(tested) + 1))
    kept_cos, refused_cos = cosine_by_position(rounds)
    # stacked, not side by side: two panels in a row crowd their titles together at a phone's width
    # which of drift and the head's confidence tells accepted from refused drafts: in the panel's title
    # (short, to stay one line on a phone), the run's means in the legend
    separates = separation(rounds)
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.2,
                        subplot_titles=[f"Over the run: {separates['verdict']}" if separates else
                                        "Over the run, by draft position", "This round, draft by draft"])
    fig.add_trace(go.Bar(x=positions, y=[a / t if t else None for a, t in zip(accepted, tested)],
                         name="share of tested drafts accepted", marker_color=FATE_COLOURS["accepted"], opacity=0.45,
                         customdata=list(zip(accepted, tested)),
                         hovertemplate="draft #%{x}: %{customdata[0]} of %{customdata[1]} tested accepted "
                                       "(%{y:.0%})<extra></extra>"), row=1, col=1)
    for values, kept in ((kept_cos, True), (refused_cos, False)):
        fig.add_trace(go.Scatter(
            x=positions, y=values, mode="lines+markers",
            name=f"mean cosine f̂ · f of {'accepted' if kept else 'refused'} drafts" + (
                f" (run: {separates['cos'][kept]:.2f}; the head's confidence q {separates['q'][kept]:.2f})"
                if separates else ""),
            line={"color": FATE_COLOURS["accepted" if kept else "rejected"], "dash": "solid" if kept else "dot"},
            marker={"symbol": "circle" if kept else "x", "size": 8},
            hovertemplate=f"draft #%{{x}}: {'accepted' if kept else 'refused'} drafts' predicted feature "
                          "has cosine %{y:.2f} with the target's<extra></extra>"), row=1, col=1)

    index = max(0, min(int(round_index), len(trace.rounds) - 1))
    chosen = trace.rounds[index]
    cos = list(chosen.detail.get("feature_cos") or ())
    if chosen.drafted and cos:
        fates = [f.fate for f in round_fates(chosen)][: len(cos)]  # the drafts come first, in order
        texts = [plot_label(trace, t) for t in chosen.drafted[: len(cos)]]  # untrusted text: literal
        fig.add_trace(go.Bar(
            x=list(range(1, len(cos) + 1)), y=cos, marker_color=[FATE_COLOURS.get(f, BASELINE_COLOUR) for f in fates],
            name="this round's drafts (colour: fate)", showlegend=True, customdata=list(zip(texts, fates)),
            hovertemplate="draft #%{x} %{customdata[0]}: %{customdata[1]}<br>cosine of its predicted feature "
                          "with the target's: %{y:.2f}<extra></extra>"), row=2, col=1)
        note = _fate_runs(fates)
        fig.layout.annotations[1].text = f"Round {index + 1}: {note}"  # in the subplot's title, not over it
    else:
        fig.add_annotation(text=f"round {index + 1} drafted nothing", xref="x2 domain", yref="y2 domain", x=0.5,
                           y=0.5, showarrow=False, font={"size": 13, "color": "#6b7280"})
    low = min([0.0] + [c for c in kept_cos + refused_cos + cos if c is not None])
    fig.update_xaxes(title_text="draft position in the round", dtick=1, row=1, col=1)
    fig.update_yaxes(title_text="share · mean cosine", range=[low - 0.02, 1.02], row=1, col=1)
    fig.update_xaxes(title_text="draft position in the round", dtick=1, row=2, col=1)
    fig.update_yaxes(title_text="cosine f̂ · f (1 = exact)", range=[low - 0.02, 1.02], row=2, col=1)
    fig.update_layout(bargap=0.3)
    return base_layout(fig, TITLE, height=680)


def _fate_runs(fates: list[str]) -> str:
    """'#1 rejected, #2–5 discarded': drafts in order, neighbours with the same fate in one run (short enough
    for a subplot title at a phone's width)."""
    runs: list[list] = []
    for i, fate in enumerate(fates, start=1):
        if runs and runs[-1][2] == fate:
            runs[-1][1] = i
        else:
            runs.append([i, i, fate])
    return ", ".join(f"#{a}{'' if a == b else f'–{b}'} {FATE_LABELS.get(f, f).split(' — ')[0]}" for a, b, f in runs)


register(MethodView(
    name="feature-head",
    title="Feature head: acceptance and feature drift",
    applies=_feature_head,
    render=feature_head_figure,
    description="EAGLE drafts in the target's feature space: by draft position, how many drafts are accepted "
                "and how close the head's predicted features were to the target's (cosine), for accepted and "
                "refused drafts, and whether that drift or the head's own confidence q tells the two apart "
                "(from this run's numbers); and the selected round's drafts one by one.",
))
