"""The race (``explorer.race``): one lane per system, its tokens coloured by how they came to be, its
tokens/s and speed-up over plain decoding, live. Draws ``race.LaneView`` data only (no model)."""

from __future__ import annotations

import html

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
        ratio = f"×{rate / base:.2f} plain decoding" if base and rate and v is not plain else \
            ("the reference" if v is plain else "")
        accepted = f"{v.accepted} of {v.drafted} drafts accepted" if v.drafted else ""
        place = f"<b>finished {ordinal(v.place)}</b>" if v.done and v.place else ""
        share = min(100.0, 100.0 * len(v.tokens) / max(1, max_new_tokens))
        text = "".join(f"<span class='race-tok race-{html.escape(k)}'>{html.escape(t)}</span>" for t, k in v.tokens)
        stats = "".join(f"<span class='race-stat'>{s}</span>" for s in (
            f"{len(v.tokens)} tokens", f"{v.clock:.2f} s", f"{rate:.1f} tokens/s", ratio, accepted, place) if s)
        lanes.append(f"<div class='race-lane{' done' if v.done else ''}' data-lane='{html.escape(v.label)}'>"
                     f"<div class='race-head'><span class='race-name'>{html.escape(v.label)}</span>{stats}</div>"
                     f"<div class='race-bar'><div style='width:{share:.1f}%'></div></div>"
                     f"<div class='race-text'>{text}</div></div>")
    legend = " · ".join(f"<span class='race-tok race-{k}'>{k}</span>" for k in ("accepted", "corrected", "bonus",
                                                                              "target"))
    head = (f"<div class='race-clock'>Race clock {clock:.2f} s — each lane's own decoding time; the lanes take turns "
            f"on the CPU, so each is shown as if it ran alone. Underlines: {legend}.</div>")
    return f"<div class='race'>{head}{''.join(lanes)}</div>"
