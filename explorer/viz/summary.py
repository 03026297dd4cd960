"""Words about a run: the one-line summary and the method's note (banner)."""

from __future__ import annotations

import html
import math
import re

from ..quality import first_divergence, token_agreement
from .explain import theorem_at
from .trust import measured_speedup, speedup_doubt
from .text import safe_markdown
from .views import note_for
from .writer import writer

STOP_REASONS = {"eos": "end of sequence", "max_new_tokens": "max new tokens reached", "stopped": "stopped by you"}


def run_summary(trace, baseline=None) -> str:
    """Markdown: first in plain words (tokens, time, how many drafts were accepted, tokens per target
    pass, the speed against plain decoding, why it stopped), then the paper's symbols on demand (a
    folded "In symbols": α̂, c, Theorem 3.8's prediction, EESD's v_d, r_d, HM and eq. 14)."""
    s = trace.summary
    who = writer(trace)
    # method, draft and model may come from an uploaded file: literal text, never markup
    head = f"**{safe_markdown(trace.method)}**" + (f" with {safe_markdown(trace.draft)}" if trace.draft else "") \
        + f" on {safe_markdown(trace.model)}"
    if not who.checked:
        head = f"**{safe_markdown(trace.method)}**: {who.name} alone, no target (lossy), on {safe_markdown(trace.model)}"
    plain = [f"{head}: {s.new_tokens} tokens in {s.wall_s:.2f} s ({s.tokens_per_s or 0:.1f} tokens/s)"]
    if s.drafted:
        tested = sum(r.tested for r in trace.rounds)
        # α̂ (in symbols) is accepted ÷ tested: say where the two counts part, or a reader sees 8/28 ≠ 0.36
        gone = s.drafted - tested
        untested = (f" ({gone} came after a refused one in {'its' if gone == 1 else 'their'} round and "
                    f"{'was' if gone == 1 else 'were'} discarded untested: {s.accepted} of {tested} tested)"
                    ) if 0 < tested < s.drafted else ""
        plain.append(f"{s.accepted} of {s.drafted} drafted tokens accepted{untested}")
    if not who.checked:
        plain.append(f"one token per step of the copy; no target pass checked any of them")
    elif s.tokens_per_target_forward:
        plain.append(f"{s.tokens_per_target_forward:.2f} tokens per target pass")
    measured, doubt = measured_speedup(trace, baseline), speedup_doubt(trace, baseline)
    if measured is not None and trace.method != "ar":
        plain.append(f"measured ×{measured:.2f} plain decoding ({baseline.summary.tokens_per_s:.1f} tokens/s)")
    elif doubt is not None:  # a figure that cannot be trusted is not printed: why, instead
        plain.append(f"speed against plain decoding: **unreliable** ({doubt.short})")
    if trace.settings.lossy and baseline is not None:
        # linear in the length (ROUGE-L is quadratic, and an uploaded trace may hold 40 000 tokens)
        output, reference = list(trace.output_ids), list(baseline.output_ids)
        diverges = first_divergence(output, reference)
        where = "identical" if diverges is None else f"first differs at token {diverges + 1}"
        plain.append(f"lossy: {token_agreement(output, reference):.0%} token agreement with the target's own output, "
                     f"{where}")
    plain.append(f"stop: {safe_markdown(STOP_REASONS.get(s.stop_reason, s.stop_reason))}")
    if precision_note(trace):
        plain.append(precision_note(trace))
    about = draft_line(trace)
    symbols = [f"{s.rounds} rounds"]
    if s.alpha_hat is not None:
        symbols.append(f'<abbr title="{html.escape(ALPHA_HAT)}">α̂</abbr> {s.alpha_hat:.2f}')
    theorem = theorem_at(trace, baseline)
    if theorem is not None:  # c and the theorem in the ledger's plain steps, as "Why this speed" gives them
        symbols.append(f'<abbr title="{html.escape(C_STEP)}">c</abbr> {theorem.c:.3f}')
        symbols.append(f'<abbr title="{html.escape(PREDICTED_PRICED)}">predicted</abbr> ×{theorem.priced:.2f}')
    else:  # no plain decoding to price a step with: c is against this run's own verification pass
        if s.c_measured is not None:
            symbols.append(f'<abbr title="{html.escape(C_MEASURED)}">c per verification</abbr> {s.c_measured:.3f}')
        if s.predicted_speedup is not None:
            symbols.append(f'<abbr title="{html.escape(PREDICTED)}">predicted if a verification cost one step</abbr> '
                           f'×{s.predicted_speedup:.2f}')
    symbols += eesd_metrics(s)
    return " · ".join(plain) + about + f"\n\n<details class='in-symbols'><summary>In symbols</summary>{' · '.join(symbols)}</details>"


def precision_note(trace) -> str:
    """For a target run in another dtype than float32: what lossless means then (empty for float32)."""
    dtype = getattr(trace, "dtype", None) or "float32"
    if dtype == "float32":
        return ""
    return (f"target in {safe_markdown(dtype)}: lossless here means identical to the {safe_markdown(dtype)} "
            "model's own plain decoding (what the audit compares with), which can differ from the float32 model's")


def draft_line(trace) -> str:
    """Which trained part the run's draft used (an exit layer, BiTA's tokens; ``trace.draft_about``), and a
    warning when it runs untrained (accepted far less). What is missing is the draft's own words: ``draft_about``
    names it (an exit at another depth ships, or none for these weights), so this line does not guess."""
    about = getattr(trace, "draft_about", None)
    if not about or about == trace.draft:
        return ""
    # what it is in words; how it runs (kernels, shortlists, compiled layers, a tree's sizing) folded, on demand (#48)
    head, how = plain_and_technical(about)
    line = f"\n\n{'Draft used' if writer(trace).checked else 'What wrote the text'}: {safe_markdown(head)}"
    if how:
        line += f"\n\n<details class='draft-how'><summary>how it runs</summary>{html.escape(how)}</details>"
    if "untrained" in about:
        line += "\n\n⚠ An untrained draft: far fewer of its tokens are accepted than a trained one's."
    return line


# a draft's clause about how it is computed rather than what it is: folded under "how it runs"
TECHNICAL = re.compile(r"kernel|LM head|layers (?:compiled|eager)|MB read|EAGLE-2 tree|priced")


def clauses(text: str) -> list[str]:
    """``text`` split at each "; " outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and text.startswith("; ", i):
            parts.append(text[start:i])
            start = i + 2
    return parts + [text[start:]]


def plain_and_technical(about: str) -> tuple[str, str]:
    """A draft's own words split into what it is (the first clause, and those after it that a reader needs: which
    trained exits ship) and how it runs (from its first ``TECHNICAL`` clause on: a draft says what it is first),
    each joined again by "; "."""
    first, *rest = clauses(about)
    at = next((i for i, c in enumerate(rest) if TECHNICAL.search(c)), len(rest))
    return "; ".join([first] + rest[:at]), "; ".join(rest[at:])


ALPHA_HAT = "α̂: accepted ÷ tested drafts, the estimate of the acceptance rate α (Leviathan et al., Definition 3.1)"
C_MEASURED = ("c per verification: seconds per draft step ÷ seconds per target verification pass (which checks a whole "
              "draft at once), measured in this run's rounds after the first")
PREDICTED = ("Leviathan et al. Theorem 3.8: (1 − α^(γ+1)) / ((1 − α)(γc + 1)) at this run's α̂, mean γ and c per "
             "verification: the speed-up if a verification pass cost one plain decoding step")
C_STEP = ("c: seconds drafting per drafted token ÷ seconds per plain decoding step (Leviathan et al.'s c), this run "
          "against plain decoding on the same prompt and settings")
PREDICTED_PRICED = ("Leviathan et al. Theorem 3.8 at this run's α̂, mean γ and c, with a verification pass priced as "
                    "measured (T(k)/T(1)): (1 − α^(γ+1)) / ((1 − α)(γc + T(k)/T(1))); Why this speed says what it "
                    "leaves out")


# EESD Appendix D: what each metric is, shown as the tooltip of its label on the page.
EESD_METRICS = (
    ("v_d", "v_d", "{:.2f}", "EESD eq. 11: v_d = accepted drafts / all drafted tokens (how good the drafts are)"),
    ("r_d", "r_d", "{:.2f}", "EESD eq. 12: r_d = accepted drafts / output tokens (the share of the output the "
                             "draft wrote)"),
    ("hm", "HM", "{:.2f}", "EESD Appendix D: harmonic mean 2·v_d·r_d / (v_d + r_d) of v_d and r_d (draft quality "
                           "and strategy in one number)"),
    ("eq14_speedup", "eq. 14 predicts", "×{:.2f}", "EESD eq. 14: predicted speedup v_d / ((α − v_d)·r_d + v_d), "
                                                   "α = T_d / T_t the measured draft/target time per token"),
)


def eesd_metrics(summary) -> list[str]:
    """v_d, r_d, HM and eq. 14's speedup (EESD Appendix D, eq. 11–14) where the summary has them, each
    label with its definition as a tooltip (``<abbr title>``). ``getattr``: older summaries lack them;
    a non-finite value (eq. 14 is 0/0 when no draft was accepted) is left out rather than shown as nan."""
    parts = []
    for field, name, fmt, meaning in EESD_METRICS:
        value = getattr(summary, field, None)
        if value is not None and math.isfinite(value):
            parts.append(f'<abbr title="{html.escape(meaning)}">{name}</abbr> {fmt.format(value)}')
    return parts


def method_banner(method: str, description: str | None, lossy: bool = False) -> str:
    """HTML above the results: the method's name and description, its registered note, and a warning
    when the run (or the method with the options on the page) is ``lossy``: its output need not follow
    the target model's distribution."""
    note = note_for(method)
    body = f"<b>{html.escape(method)}</b>"
    if description:
        body += f" — {html.escape(description)}"
    if note is not None:
        body += f"<div class='method-note'>{html.escape(note.text)}</div>"
    if lossy:
        body += ("<div class='method-lossy'>⚠ Lossy method: its output can differ from what the target model "
                 "alone would produce.</div>")
    return f"<div class='method-banner{' lossy' if lossy else ''}' data-method='{html.escape(method)}'>{body}</div>"


BANNER_CSS = """
.method-banner { border-left: 4px solid #2563eb; background: #eff6ff; color: #1e3a8a; padding: 6px 10px;
  border-radius: 4px; font-size: 13px; }
.method-banner.lossy { border-left-color: #d97706; background: #fffbeb; color: #78350f; }
.method-note { margin-top: 3px; }
.method-lossy { margin-top: 3px; font-weight: 600; }
"""
