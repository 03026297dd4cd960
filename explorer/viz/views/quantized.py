"""The target's own weights in low bits as its draft (drafts ``int4`` / ``int8``, method ``quantized``):
where the low-bit copy parted from the target, and why it so rarely does.

The copy has the target's weights (for the default model exactly: the GGUF's 4-bit blocks) and differs
only in rounding — bf16 activations, a 4-bit pass over the LM head — so it picks another token only where the target
itself barely prefers its own: a near-tie between its top two. Figure: the target's top-2 margin
(p₁ − p₂ at the drafted position) for the drafts it accepted against those it refused. Panel: each place
the copy parted (the copy's token and q, the target's token and p, the margin), what a draft step cost
against a verification, and — with the copy decoding alone (``role=alone``) — what that changes.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from ..style import FATE_COLOURS, base_layout, empty_figure
from ..text import label
from ...words import plural
from . import MethodView, register, register_note

KINDS = ("int4", "int8")
NEAR_TIE = 0.1  # a top-2 margin under this is a close call the copy's rounding can tip
BINS = 10
MAX_LISTED = 12  # refusals the panel lists (the selected round's first, then the nearest)
TITLE = "The low-bit copy against the target: where they part"


def _copy_drafts(trace) -> bool:
    return str(trace.draft or "").partition(":")[0] in KINDS


def _alone(trace) -> bool:
    return _copy_drafts(trace) and trace.method == "quantized" and trace.settings.options.get("role") == "alone"


def margin(top) -> float | None:
    """p₁ − p₂ from a position's recorded top alternatives ((id, p) pairs, best first); None without two."""
    probs = sorted((p for _, p in top), reverse=True)
    return probs[0] - probs[1] if len(probs) >= 2 else None


def partings(trace) -> list[dict]:
    """Every tested draft the target refused: round, position, the copy's token and q (and the target's p
    of it), the target's own token and p, the target's top-2 margin there."""
    out = []
    for r in trace.rounds:
        j = r.rejected_at
        if j is None or j >= len(r.drafted) or j >= len(r.emitted):
            continue
        out.append({"round": r.index, "position": j + 1, "copy": r.drafted[j],
                    "q": r.q_drafted[j] if j < len(r.q_drafted) else None,
                    "p_copy": r.p_drafted[j] if j < len(r.p_drafted) else None,
                    "target": r.emitted[j], "p": r.p_emitted[j] if j < len(r.p_emitted) else None,
                    "margin": margin(r.target_top[j]) if j < len(r.target_top) else None})
    return out


def margins_by_fate(trace) -> tuple[list[float], list[float]]:
    """The target's top-2 margin at every accepted draft and at every refused one."""
    accepted, refused = [], []
    for r in trace.rounds:
        for i in range(min(r.tested, len(r.drafted), len(r.target_top))):
            m = margin(r.target_top[i])
            if m is not None:
                (accepted if i < r.n_accepted else refused).append(m)
    return accepted, refused


def margin_figure(trace, round_index: int) -> go.Figure:
    accepted, refused = margins_by_fate(trace)
    if not refused and not accepted:
        why = "the copy decoded alone: no target checked it" if _alone(trace) else "no draft was tested yet"
        return empty_figure(TITLE, why)
    edges = [i / BINS for i in range(BINS + 1)]
    centres = [(a + b) / 2 for a, b in zip(edges, edges[1:])]

    def shares(values):
        counts = [0] * BINS
        for v in values:
            counts[min(int(v * BINS), BINS - 1)] += 1
        return [c / len(values) if values else 0 for c in counts]

    fig = go.Figure()
    for values, fate, words in ((accepted, "accepted", "accepted drafts"), (refused, "rejected", "refused drafts")):
        fig.add_trace(go.Bar(x=centres, y=shares(values), width=1 / BINS * 0.9, name=f"{words} ({len(values)})",
                             marker_color=FATE_COLOURS[fate], opacity=0.8,
                             hovertemplate=f"margin %{{x:.2f}} ± 0.05<br>%{{y:.0%}} of the {words}<extra></extra>"))
    close = sum(m < NEAR_TIE for m in refused)
    tail = f": {close} of {len(refused)} refusals at a near-tie (< {NEAR_TIE:g})" if refused else ": none refused"
    fig.update_layout(barmode="overlay", xaxis={"title": {"text": "the target's top-2 margin p₁ − p₂ at the draft"},
                                                "range": [0, 1]},
                      yaxis={"title": {"text": "share of the drafts"}, "tickformat": ".0%", "rangemode": "tozero"})
    return base_layout(fig, TITLE + tail, height=320)


def copy_html(trace, round_index: int) -> str:
    s = trace.summary
    if _alone(trace):
        return ("<div class='tl-view'><b>The low-bit copy decoded alone</b>: no target checked this text, as when a "
                f"quantised model is served. It made {s.new_tokens} tokens at "
                f"{(s.tokens_per_s or 0):.1f} tokens/s. Where its text parts from the target's own is in the status "
                "and in <b>What keeping the text costs</b>, beside the same copy drafting for the target: quantising "
                "is faster and changes the text; drafting with it keeps the text.</div>")
    parts = partings(trace)
    drafted = s.drafted
    accepted = s.accepted
    head = (f"The copy drafted {plural(drafted, 'token')} and the target accepted {accepted}"
            f"{f' ({accepted / drafted:.0%})' if drafted else ''}.")
    later = [r for r in trace.rounds[1:] if r.drafted and r.draft_forwards and r.target_forwards]
    if later:  # the run's own clocks, rounds after the first (whose passes also read the prompt): no derived c
        step = 1000 * sum(r.timing.draft_s for r in later) / sum(r.draft_forwards for r in later)
        check = 1000 * sum(r.timing.verify_s for r in later) / sum(r.target_forwards for r in later)
        tokens = sum(len(r.emitted) for r in later) / len(later)
        spent = 1000 * sum(r.timing.total_s for r in later) / len(later)
        head += (f" After the first round a step of the copy took {step:.1f} ms and the target's check of a whole "
                 f"draft {check:.1f} ms: a round took {spent:.0f} ms and gave {tokens:.1f} tokens "
                 f"({spent / tokens:.1f} ms a token).")
    if not parts:
        return f"<div class='tl-view'><div class='tl-head'>{html.escape(head)} It never parted from the target.</div></div>"
    close = sum(1 for p in parts if p["margin"] is not None and p["margin"] < NEAR_TIE)
    head += (f" It parted {plural(len(parts), 'time')}; {close} of them where the target's top two were within {NEAR_TIE:g} "
             "of each other — a close call that rounding can tip.")
    selected = max(0, int(round_index))
    listed = sorted(parts, key=lambda p: (abs(p["round"] - selected), p["round"]))[:MAX_LISTED]
    rows = "".join(_row(trace, p) for p in sorted(listed, key=lambda p: (p["round"], p["position"])))
    more = f"<div>… and {len(parts) - len(listed)} more.</div>" if len(parts) > len(listed) else ""
    return (f"<div class='tl-view'><div class='tl-head'>{html.escape(head)}</div>"
            "<table class='figure-table'><thead><tr><th>round</th><th>draft position</th><th>the copy drafted (q)</th>"
            "<th>the target chose (p)</th><th>target's p of the copy's token</th><th>target's top-2 margin</th>"
            f"</tr></thead><tbody>{rows}</tbody></table>{more}</div>")


def _row(trace, p: dict) -> str:
    cells = [str(p["round"] + 1), str(p["position"]),
             f"{html.escape(label(trace, p['copy']))} {_prob(p['q'], 'q')}",
             f"{html.escape(label(trace, p['target']))} {_prob(p['p'], 'p')}",
             _prob(p["p_copy"], "p"), "" if p["margin"] is None else f"{p['margin']:.3f}"]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _prob(value, symbol: str) -> str:
    return "" if value is None else f"({symbol} = {value:.3f})"


register(MethodView(
    name="lowbit-margins", title="Low-bit copy: where it parts from the target", applies=_copy_drafts,
    render=margin_figure,
    description="The target's top-2 margin at the drafts it accepted and at those it refused: the copy parts at near-ties.",
))
register(MethodView(
    name="lowbit-partings", title="Low-bit copy: each refusal", applies=_copy_drafts, render=copy_html, kind="html",
    description="Each place the copy's token was refused: both tokens, their probabilities, the target's margin.",
))
register_note("quantized", "The draft is the target's own weights in low bits (for the default model exactly its "
                           "4-bit GGUF blocks), so it agrees with the target almost always; the full-precision target "
                           "verifies every token, so the output is the target's. With the copy's role set to alone, "
                           "no target checks it: faster, and lossy.")
