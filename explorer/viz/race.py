"""The race (``explorer.race``): one lane per system, its tokens coloured by how they came to be, its
tokens/s and speed-up over plain decoding, live. Draws ``race.LaneView`` data only (no model).

A lane's ratio to plain decoding is printed only where the honesty rule lets it (``reports.row_doubt``: the pace
held between its rounds and plain decoding's, and a lossless lane gains no more than its tokens per target pass
allow); otherwise the lane says it is withheld and why (#48: ×1.48 and ×4.90 for the same lane). A lossy lane is
marked so, with how much of plain decoding's text it kept; the 4-bit copy alone's tokens are the copy's."""

from __future__ import annotations

import html

from ..reports import row_doubt
from ..words import ordinal
from .style import FATE_COLOURS


RACE_CSS = """
.race { font-size: 13px; }
.race-clock { color: #475569; margin-bottom: 6px; }
.race-lane { border: 1px solid #e5e7eb; border-radius: 8px; padding: 6px 10px; margin: 6px 0; background: #fff; }
.race-lane.done { border-color: #86efac; }
.race-head { display: flex; gap: 14px; align-items: baseline; flex-wrap: wrap; }
.race-name { font-weight: 600; min-width: 220px; font-family: ui-monospace, monospace; }
.race-stat { color: #334155; white-space: nowrap; }
.race-bar { height: 6px; background: #e5e7eb; border-radius: 3px; margin: 5px 0; overflow: hidden; }
.race-bar > div { height: 100%; background: #2563eb; transition: width 0.3s; }
.race-text { font-family: ui-monospace, monospace; white-space: pre-wrap; line-height: 1.6; max-height: 7.5em;
  overflow-y: auto; }
.race-tok { border-bottom: 3px solid transparent; }
.race-lossy { background: #fffbeb; color: #78350f; border: 1px solid #f59e0b; border-radius: 999px; padding: 0 7px;
  font-size: 12px; font-weight: 600; }
.race-withheld { color: #78350f; border-bottom: 1px dotted #78350f; cursor: help; }
""" + "".join(f".race-{k} {{ border-bottom-color: {c}; }}\n" for k, c in FATE_COLOURS.items())


def race_html(views, max_new_tokens: int) -> str:
    """The lanes now: the first is plain decoding, whose tokens/s every speed-up is measured against."""
    if not views:
        return ("<div class='race'><div class='race-clock'>Pick up to three systems and start the race: each lane "
                "decodes the Watch tab's prompt with its settings.</div></div>")
    plain = views[0]
    base = len(plain.tokens) / plain.clock if plain.clock > 0 and plain.tokens else None
    clock = min((v.clock for v in views if not v.done), default=max(v.clock for v in views))
    lanes = []
    for v in views:
        rate = len(v.tokens) / v.clock if v.clock > 0 else 0.0
        ratio = _ratio(v, plain, rate / base if base and rate else None) if v is not plain else "the reference"
        accepted = f"{v.accepted} of {v.drafted} drafts accepted" if v.drafted else ""
        place = f"<b>finished {ordinal(v.place)}</b>" if v.done and v.place else ""
        share = min(100.0, 100.0 * len(v.tokens) / max(1, max_new_tokens))
        text = "".join(f"<span class='race-tok race-{html.escape(k)}'>{html.escape(t)}</span>" for t, k in v.tokens)
        stats = "".join(f"<span class='race-stat'>{s}</span>" for s in (
            f"{len(v.tokens)} tokens", f"{v.clock:.2f} s", f"{rate:.1f} tokens/s", ratio, accepted, _kept(v), place)
            if s)
        name = html.escape(v.label) + (" (the 4-bit copy alone)" if getattr(v, "copy_alone", False) else "") + \
            (" <span class='race-lossy' title='its text can differ from the target&#x27;s "
                                       "own'>lossy</span>" if getattr(v, "lossy", False) else "")
        lanes.append(f"<div class='race-lane{' done' if v.done else ''}' data-lane='{html.escape(v.label)}'>"
                     f"<div class='race-head'><span class='race-name'>{name}</span>{stats}</div>"
                     f"<div class='race-bar'><div style='width:{share:.1f}%'></div></div>"
                     f"<div class='race-text'>{text}</div></div>")
    kinds = ["accepted", "corrected", "bonus", "target"] + (["copy"] if any(getattr(v, "copy_alone", False)
                                                                           for v in views) else [])
    legend = " · ".join(f"<span class='race-tok race-{k}'>{COPY if k == 'copy' else k}</span>" for k in kinds)
    head = (f"<div class='race-clock'>Race clock {clock:.2f} s — each lane's own decoding time; the lanes take turns "
            f"on the CPU, so each is shown as if it ran alone. Underlines: {legend}.</div>")
    return f"<div class='race'>{head}{''.join(lanes)}</div>"


COPY = "copy (the 4-bit copy alone, unchecked)"


def _ratio(v, plain, ratio: float | None) -> str:
    """The lane's ×plain decoding, or why it is withheld (the rule of every ratio of times, ``reports.row_doubt``)."""
    if ratio is None:
        return ""
    row = {"speedup_vs_ar": ratio, "pace_ms": list(getattr(v, "pace_ms", ())), "lossy": getattr(v, "lossy", None),
           "tokens_per_target_forward": getattr(v, "per_pass", None)}
    doubt = row_doubt(row, {"speedup_vs_ar": 1.0, "pace_ms": list(getattr(plain, "pace_ms", ()))})
    if doubt is None:
        return f"×{ratio:.2f} plain decoding"
    return (f"<span class='race-withheld' data-tip='{html.escape(doubt[:1].upper() + doubt[1:], quote=True)}'>× plain "
            "decoding withheld</span>")


def _kept(v) -> str:
    """A lossy lane against plain decoding's tokens so far: the share it kept, where it first parted."""
    agreement = getattr(v, "agreement", None)
    if agreement is None:
        return ""
    where = "same text so far" if v.differs_at is None else f"parts at token {v.differs_at + 1}"
    return f"{agreement:.0%} of plain decoding's tokens kept, {where}"
