"""What keeping the text costs: one ``quantized`` run beside the same 4-bit copy decoding alone and plain decoding.

The explorer's headline in one view (#48). The target's own weights in 4 bits can serve by themselves (fast, and
their text parts from the target's wherever rounding tips a near-tie) or draft for the target, which checks every
token (lossless, and most of the speed kept, since one pass checks a whole draft). The view puts three runs of
one prompt and settings side by side: their speed, what each ratio to plain decoding is worth (the rule of every
ratio of times, ``trust``: withheld where the machine's pace moved, never printed where impossible), how much of
the target's text the copy alone kept and where it first departs, and, in words from these numbers, what keeping
the text cost. The three are timed as the lanes of one race right after the run, taking turns on the CPU
(``explorer.race``), so load that comes and goes falls on all of them alike.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from ..quality import first_divergence, token_agreement
from ..words import plural
from .text import piece
from .trust import measured_speedup, speedup_doubt
from .writer import copy_bits

CONTEXT = 8  # tokens shown before the place the copy's text departs
AFTER = 6  # tokens of each text shown after it


@dataclass(frozen=True)
class Keeping:
    """The three runs: ``drafting`` (the copy drafts, the target checks), ``alone`` (the copy by itself) and
    ``plain`` (plain decoding), all on one prompt and settings; ``timed``: how the last two were timed, in words."""

    drafting: object
    alone: object
    plain: object
    timed: str = "as the lanes of one race, taking turns on the CPU"


def keeping_html(k: Keeping | None, waiting: str = "") -> str:
    """The view; ``waiting``: a line while the comparison runs (the view then says what is coming)."""
    if k is None:
        body = waiting or ("Run <code>quantized</code> (or the copy alone) to see the target's 4-bit copy drafting "
                           "for it beside the same copy alone and plain decoding.")
        return f"<div class='keep'><div class='keep-head'>What keeping the text costs</div><div>{body}</div></div>"
    bits = copy_bits(k.drafting)
    rows = [
        _row(f"The {bits} copy drafts, the target checks every token", "quantized", k.drafting, k.plain,
             _kept_words(k.drafting, k.plain, checked=True)),
        _row(f"The {bits} copy alone", "quantized, the copy's role alone", k.alone, k.plain,
             _kept_words(k.alone, k.plain, checked=False), lossy=True),
        _row("Plain decoding", "ar", k.plain, k.plain, "the target's text"),
    ]
    top = max((t.summary.tokens_per_s or 0) for t in (k.drafting, k.alone, k.plain)) or 1.0
    bars = "".join(r.html(top) for r in rows)
    return (f"<div class='keep' data-drafting='{_ratio_attr(k.drafting, k.plain)}' "
            f"data-alone='{_ratio_attr(k.alone, k.plain)}'><div class='keep-head'>What keeping the text costs</div>"
            f"{bars}<div class='keep-words'>{html.escape(keeping_words(k))}</div>{_departs(k)}"
            f"<div class='keep-how'>{html.escape(_how(k))}</div></div>")


@dataclass(frozen=True)
class _Row:
    name: str
    system: str
    tokens_per_s: float
    ratio: str
    comparable: bool
    text: str
    lossy: bool

    def html(self, top: float) -> str:
        width = 100 * self.tokens_per_s / top if top else 0
        badge = " <span class='keep-lossy'>lossy</span>" if self.lossy else ""
        kind = " lossy" if self.lossy else " plain" if self.system == "ar" else ""
        return (f"<div class='keep-row{kind}'>"
                f"<div class='keep-name'>{html.escape(self.name)}{badge} <code>{html.escape(self.system)}</code></div>"
                f"<div class='keep-line'><div class='keep-bar{'' if self.comparable else ' apart'}'>"
                f"<div style='width:{width:.1f}%'></div></div>"
                f"<span class='keep-speed'>{self.tokens_per_s:.1f} tokens/s · {self.ratio}</span></div>"
                f"<div class='keep-text'>{html.escape(self.text)}</div></div>")


def _row(name: str, system: str, trace, plain, text: str, lossy: bool = False) -> _Row:
    if trace is plain:
        ratio, comparable = "×1 (the reference)", True
    else:
        measured = measured_speedup(trace, plain)
        comparable = measured is not None
        ratio = f"×{measured:.2f} plain decoding" if comparable else "× withheld (see below)"
    return _Row(name, system, trace.summary.tokens_per_s or 0.0, ratio, comparable, text, lossy)


def _kept_words(trace, plain, checked: bool) -> str:
    ours, reference = list(trace.output_ids), list(plain.output_ids)
    if checked:
        same = ours == reference
        if trace.settings.temperature == 0:
            return (f"the target's text: all {plural(len(reference), 'token')}, identical" if same else
                    f"the target's text (differs from plain decoding at token {first_divergence(ours, reference) + 1}: "
                    "see the Audit tab)")
        return "the target's text, in distribution (sampled: every token drawn as the target would draw it)"
    if trace.settings.temperature != 0:
        return "its own text: sampled, so it is not compared token by token"
    parts = first_divergence(ours, reference)
    if parts is None:
        return f"kept all {plural(len(reference), 'token')} of the target's text this time"
    return (f"kept {token_agreement(ours, reference):.0%} of the target's tokens; its text departs at token "
            f"{parts + 1}")


def keeping_words(k: Keeping) -> str:
    """What keeping the text cost, in plain words from the three runs' numbers."""
    drafting, alone = measured_speedup(k.drafting, k.plain), measured_speedup(k.alone, k.plain)
    s = k.drafting.summary
    passes = (f"the target checked {s.drafted} drafted tokens in {plural(s.target_forwards, 'pass', 'passes')} and "
              f"accepted {s.accepted} ({s.tokens_per_target_forward or 1:.1f} tokens a pass, where plain decoding "
              "makes 1)")
    greedy = k.alone.settings.temperature == 0
    parts = first_divergence(list(k.alone.output_ids), list(k.plain.output_ids)) if greedy else None
    if greedy and parts is not None:
        lost = f"its text departs from the target's at token {parts + 1}"
    elif greedy:
        lost = ("this time its text matched the target's (it parts only where the target's top two tokens are nearly "
                "tied, and such a tie tips on other prompts)")
    else:
        lost = "its text is not the target's distribution"
    if drafting is None or alone is None:
        missing = []
        for name, trace, ratio in (("the drafting run", k.drafting, drafting), ("the copy alone", k.alone, alone)):
            if ratio is None:
                doubt = speedup_doubt(trace, k.plain)
                missing.append(f"{name} ({doubt.short.split(';')[0] if doubt else 'not measured'})")
        return (f"Not weighed against plain decoding: {' and '.join(missing)}; the race in Compare measures them "
                f"side by side. What stands: the copy alone needs no target and {lost}; drafting with it, {passes}, "
                "so every token is the target's.")
    if drafting >= alone:
        return (f"Keeping the target's text cost nothing here: drafting ran ×{drafting:.2f} plain decoding, the copy "
                f"alone ×{alone:.2f}; {passes}.")
    cost = (f"Keeping the target's text cost {1 - drafting / alone:.0%} of the copy's speed: alone, the "
            f"{copy_bits(k.drafting)} copy ran ×{alone:.2f} plain decoding and {lost}; drafting for the target it ran "
            f"×{drafting:.2f} and every token is the target's.")
    return f"{cost} Drafting keeps {drafting / alone:.0%} of the copy's speed: {passes}.{_where_it_goes(s)}"


def _where_it_goes(s) -> str:
    """Where keeping the text goes, from the drafting run's own clock: the target's passes (one a round, over the
    whole draft) against the copy's steps spent on drafts the target refused. Nothing where the run timed no step."""
    if not (s.draft_forwards and s.target_forwards and s.draft_s > 0 and s.verify_s > 0 and s.wall_s > 0):
        return ""
    refused = s.drafted - s.accepted
    wasted = refused * s.draft_s / s.draft_forwards
    cause = ("checking every token, not the copy's mistakes, is what keeping the text costs" if s.verify_s >= wasted
             else "the copy's refused drafts cost more than the checking")
    refusals = (f"the {plural(refused, 'draft')} it refused had cost the copy {wasted:.2f} s" if refused else
                "it refused none of the copy's drafts")
    passes = plural(s.target_forwards, "pass", "passes")
    return (f" Where it goes: of the run's {s.wall_s:.2f} s, the target's {passes} took {s.verify_s:.2f} s and "
            f"{refusals}: {cause}.")


def _departs(k: Keeping) -> str:
    """Where the copy alone's text first departs from plain decoding's: the words before, then each text's next
    words (greedy runs only)."""
    if k.alone.settings.temperature != 0:
        return ""
    ours, reference = list(k.alone.output_ids), list(k.plain.output_ids)
    at = first_divergence(ours, reference)
    if at is None or at >= min(len(ours), len(reference)):
        return ""

    def words(trace, ids) -> str:
        return html.escape("".join(piece(trace, t) for t in ids)).replace("\n", "↵")

    before = words(k.plain, reference[max(0, at - CONTEXT):at])
    return (f"<div class='keep-departs'>Where the copy's text departs (token {at + 1}): "
            f"<span class='keep-context'>…{before}</span><br>"
            f"<span class='keep-target'>target: {words(k.plain, reference[at:at + AFTER])}…</span><br>"
            f"<span class='keep-copy'>copy alone: {words(k.alone, ours[at:at + AFTER])}…</span></div>")


def _how(k: Keeping) -> str:
    return (f"How it was timed: {k.timed}. A ratio is shown only where the machine kept its pace (a fixed test timed "
            "between rounds) and could be true; the race in Compare runs any methods side by side.")


def _ratio_attr(trace, plain) -> str:
    measured = measured_speedup(trace, plain)
    return "withheld" if measured is None else f"{measured:.4f}"


KEEPING_CSS = """
.keep { font-size: 13px; border: 1px solid #e5e7eb; border-radius: 8px; padding: 8px 10px; background: #fff; }
.keep-head { font-weight: 700; font-size: 14px; margin-bottom: 6px; }
.keep-row { margin: 6px 0; }
.keep-name { font-weight: 600; color: #1f2937; }
.keep-name code { font-weight: 400; font-size: 12px; color: #475569; }
.keep-lossy { background: #fffbeb; color: #78350f; border: 1px solid #f59e0b; border-radius: 999px; padding: 0 6px;
  font-size: 11px; }
.keep-line { display: flex; align-items: center; gap: 8px; flex-wrap: wrap; }
.keep-bar { flex: 1 1 120px; height: 10px; background: #f1f5f9; border-radius: 5px; overflow: hidden; min-width: 80px; }
.keep-bar > div { height: 100%; background: #009E73; }
.keep-row.lossy .keep-bar > div { background: #E69F00; }
.keep-row.plain .keep-bar > div { background: #6b7280; }
.keep-bar.apart > div { background: repeating-linear-gradient(45deg, #cbd5e1 0 4px, #e2e8f0 4px 8px); }
.keep-speed { white-space: nowrap; color: #334155; }
.keep-text { color: #475569; }
.keep-words { margin-top: 8px; color: #111827; }
.keep-departs { margin-top: 6px; font-family: ui-monospace, monospace; font-size: 12px; white-space: pre-wrap;
  word-break: break-word; }
.keep-context { color: #64748b; }
.keep-target { color: #0072B2; }
.keep-copy { color: #9a6700; }
.keep-how { margin-top: 6px; color: #64748b; font-size: 12px; }
"""
