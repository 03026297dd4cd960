"""Hierarchical speculative decoding (method ``hierarchical``): one lane per model for the selected round —
what the smaller draft proposed in each inner round and where the draft above refused it, the tokens that
draft handed to the target and where the target refused them, and what the target emitted — with the
run's acceptance and forwards per level."""

from __future__ import annotations

import html

from ..style import FATE_COLOURS
from ..text import inline_html, piece
from ...words import plural
from . import MethodView, register, register_note


def _hierarchical(trace) -> bool:
    return trace.method == "hierarchical"


def _chip(trace, token: int, fate: str, title: str, own: bool = False) -> str:
    extra = " hier-own" if own else ""
    return (f'<span class="hier-tok hier-{fate}{extra}" data-tip="{html.escape(title)}">'
            f"{inline_html(piece(trace, token))}</span>")


def _target_fates(r) -> list[str]:
    """accepted / rejected / discarded for each token the draft chain handed to the target."""
    fates = ["accepted"] * r.n_accepted
    if r.rejected_at is not None:
        fates.append("rejected")
    return (fates + ["discarded"] * len(r.drafted))[: len(r.drafted)]


def _lower_fates(inner: dict) -> list[str]:
    drafted, accepted = inner["drafted"], inner["accepted"]
    return ["accepted"] * accepted + (["rejected"] if accepted < len(drafted) else []) + \
        ["discarded"] * max(len(drafted) - accepted - 1, 0)


def hierarchical_lanes_html(trace, round_index: int) -> str:
    last = max(0, min(int(round_index), len(trace.rounds) - 1))
    r = trace.rounds[last]
    detail = r.detail or {}
    levels = detail.get("levels") or []
    inner_rounds = detail.get("inner_rounds") or []
    if not levels or not r.drafted:
        body = "<p>This round drafted nothing (the controller asked for no draft, or the last token of the budget).</p>"
        return f"<style>{HIER_CSS}</style>{_run_line(trace)}{body}"
    lower, upper = levels[-2], levels[-1]
    target_fate = _target_fates(r)
    lower_lane, upper_lane, position = [], [], 0
    for n, inner in enumerate(inner_rounds, 1):
        lower_chips = [_chip(trace, t, fate, f"inner round {n}: {lower} drafted it; {upper} {words}")
                       for t, fate, words in zip(inner["drafted"], _lower_fates(inner), _words(_lower_fates(inner)))]
        lower_lane.append(f'<span class="hier-group">{"".join(lower_chips) or "<i>no draft</i>"}</span>')
        made = list(inner["drafted"][: inner["accepted"]]) + [inner["next"]]
        upper_chips = []
        for j, token in enumerate(made):
            if position >= len(target_fate):
                break  # the controller stopped the chain's draft here
            fate = target_fate[position]
            own = j >= inner["accepted"]
            how = f"{upper}'s own ({inner.get('kind', 'own')})" if own else f"taken from {lower}"
            upper_chips.append(_chip(trace, token, fate, f"inner round {n}: {how}; the target: {_word(fate)}", own))
            position += 1
        upper_lane.append(f'<span class="hier-group">{"".join(upper_chips)}</span>')
    target_chips = [_chip(trace, t, kind, f"the target: {kind}") for t, kind in zip(r.emitted, r.emitted_kind)]
    rows = [(f"{html.escape(lower)}", "drafts for the level below it, in inner rounds", lower_lane),
            (f"{html.escape(upper)}", "verifies them in one pass each, hands its tokens to the target", upper_lane),
            ("target", "verifies the chain's tokens in one pass", [f'<span class="hier-group">{"".join(target_chips)}</span>'])]
    table = "".join(f'<tr><th>{name}<div class="hier-sub">{sub}</div></th><td>{"".join(cells)}</td></tr>'
                    for name, sub, cells in rows)
    forwards = detail.get("level_forwards") or []
    per_level = ", ".join(f"{html.escape(name)} {f}" for name, f in zip(levels, forwards))
    caption = (f"Round {last + 1} of {len(trace.rounds)}: {plural(len(inner_rounds), 'inner round')}; forwards this round: "
               f"{per_level}, target 1. Boxed: a level's own token (its correction or bonus).")
    legend = "".join(f'<span class="hier-tok hier-{f}">{f}</span> ' for f in ("accepted", "rejected", "discarded"))
    return (f"<style>{HIER_CSS}</style>{_run_line(trace)}<div class='hier-legend'>{legend}</div>"
            f"<div class='hier-caption'>{caption}</div><table class='hier-lanes'>{table}</table>")


def _word(fate: str) -> str:
    return {"accepted": "accepted", "rejected": "refused", "discarded": "discarded (after a refusal)"}.get(fate, fate)


def _words(fates: list[str]) -> list[str]:
    return [_word(f) for f in fates]


def level_totals(trace) -> list[dict]:
    """Per level, smallest first: drafts it proposed to the level above, how many were accepted, its forwards."""
    rounds = [r for r in trace.rounds if r.detail.get("levels")]
    if not rounds:
        return []
    levels = rounds[0].detail["levels"]
    totals = [{"level": name, "drafted": 0, "accepted": 0, "tested": 0, "forwards": 0} for name in levels]
    for r in rounds:
        if r.detail.get("levels") != levels:
            continue
        for total, f in zip(totals, r.detail.get("level_forwards") or []):
            total["forwards"] += f
        for inner in r.detail.get("inner_rounds") or []:  # the level just below the top
            below = totals[-2]
            below["drafted"] += len(inner["drafted"])
            below["accepted"] += inner["accepted"]
            below["tested"] += inner["accepted"] + (inner["accepted"] < len(inner["drafted"]))
        top = totals[-1]
        top["drafted"] += len(r.drafted)
        top["accepted"] += r.n_accepted
        top["tested"] += r.tested
    return totals


def _run_line(trace) -> str:
    totals = level_totals(trace)
    if not totals:
        return ""
    parts = []
    for i, t in enumerate(totals):
        above = totals[i + 1]["level"] if i + 1 < len(totals) else "the target"
        if t["tested"]:  # tracked for the two levels nearest the target
            parts.append(f"{html.escape(t['level'])} → {html.escape(above)}: {t['accepted']} of {t['tested']} tested "
                         f"drafts accepted (α̂ {t['accepted'] / t['tested']:.2f}), {t['forwards']} forwards")
        else:
            parts.append(f"{html.escape(t['level'])}: {t['forwards']} forwards")
    target = sum(r.target_forwards for r in trace.rounds)
    return f"<div class='hier-run'>Whole run: {'; '.join(parts)}; target {target} forwards.</div>"


HIER_CSS = f"""
.hier-lanes {{ border-collapse: collapse; width: 100%; }}
.hier-lanes th {{ text-align: left; vertical-align: top; padding: 6px 10px 6px 0; width: 16em; font-weight: 600; }}
.hier-lanes td {{ padding: 6px 0; border-top: 1px solid #e5e7eb; font-family: ui-monospace, monospace; line-height: 2; }}
.hier-sub {{ font-weight: 400; font-size: 12px; color: #6b7280; }}
.hier-group {{ display: inline-block; margin-right: 14px; padding-right: 10px; border-right: 2px dotted #d1d5db; }}
.hier-tok {{ border-radius: 3px; padding: 1px 3px; margin-right: 2px; white-space: pre-wrap; }}
.hier-accepted {{ background: {FATE_COLOURS['accepted']}26; color: #14532d; }}
.hier-rejected {{ background: {FATE_COLOURS['rejected']}26; color: #7f1d1d; text-decoration: line-through; }}
.hier-discarded {{ background: {FATE_COLOURS['discarded']}26; color: #374151; opacity: 0.7; }}
.hier-corrected {{ background: {FATE_COLOURS['corrected']}33; color: #7c2d12; }}
.hier-bonus {{ background: {FATE_COLOURS['bonus']}40; color: #111827; }}
.hier-target {{ background: {FATE_COLOURS['target']}26; color: #1e3a8a; }}
.hier-own {{ outline: 1.5px solid #111827; }}
.hier-legend, .hier-caption, .hier-run {{ font-size: 13px; margin-bottom: 6px; }}
"""

register(MethodView(
    name="hierarchical-lanes",
    title="Hierarchical drafts: who proposed what, where each level refused",
    applies=_hierarchical,
    render=hierarchical_lanes_html,
    kind="html",
    description="One lane per model for the selected round: the smaller draft's inner rounds, the tokens the draft "
                "above handed on, and what the target kept.",
))
register_note("hierarchical", "Hierarchical speculative decoding: the draft is itself drafted by a smaller one, and "
                              "every level verifies the one below with the exact rule, so the output is the target's.")
