"""The token view: the output up to a chosen round, that round's tokens coloured by their fate.

Fates (Leviathan et al., Algorithm 1): a drafted token x_i is *accepted* when r_i ≤ p(x_i)/q(x_i)
(greedy: when it equals the target's argmax); the first refused one is *rejected*; drafts after it are
*discarded* untested; the round then ends with one token from the target: *corrected* (drawn from the
residual norm(max(0, p − q)), eq. in Algorithm 1) after a rejection, or *bonus* (drawn from p at
position γ + 1) after a fully accepted round. Autoregressive rounds emit one plain *target* token; the
target's low-bit copy decoding alone emits one *copy* token a round, which no target checked (``writer``).

HTML contract (tests and the browser rely on it): inside the view every output token is a span with the
class ``tok`` and one ``tok-<fate>``; tokens of earlier rounds also carry ``tok-past`` (muted), those of
the chosen round ``tok-current``; every token has ``data-round``. The prompt and the legend use other
classes (``tok-prompt``, ``swatch``), never ``tok``. Each token's ``data-tip`` gives q, p and the uniform.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from .style import FATE_COLOURS, FATE_LABELS, tint
from .text import inline_html, label, piece
from .writer import writer

FATES = ("accepted", "rejected", "discarded", "corrected", "bonus", "target", "copy")
SPECULATIVE_FATES = FATES[:-1]  # the legend of every run but the copy alone's


@dataclass(frozen=True)
class TokenFate:
    """One token of a round as the view shows it; ``position`` is its index among the drafts
    (None for the target's own token); q, p, u are None where the trace has no value."""

    token_id: int
    fate: str
    position: int | None
    q: float | None = None
    p: float | None = None
    u: float | None = None
    residual: float | None = None


def round_fates(r, plain: str = "target") -> list[TokenFate]:
    """A round's tokens in display order: accepted drafts, the rejected draft, the discarded drafts,
    then the target's token (corrected, bonus or target). ``plain``: the fate of a token recorded as the
    target's own step (``writer(trace).fate``: "copy" where the low-bit copy decoded alone)."""
    fates = []
    for i in range(r.n_accepted):
        fates.append(TokenFate(r.drafted[i], "accepted", i, r.q_drafted[i], r.p_drafted[i], _at(r.uniforms, i)))
    for i in range(r.n_accepted, len(r.drafted)):
        fate = "rejected" if i == r.rejected_at else "discarded"
        u = _at(r.uniforms, i) if fate == "rejected" else None
        fates.append(TokenFate(r.drafted[i], fate, i, r.q_drafted[i], r.p_drafted[i], u))
    for j in range(r.n_accepted, len(r.emitted)):
        token, kind = r.emitted[j], r.emitted_kind[j]
        kind = plain if kind == "target" else kind
        residual = dict(r.residual_top).get(token) if (kind == "corrected" and r.residual_top) else None
        q = dict(r.draft_top[j]).get(token) if j < len(r.draft_top) else None
        fates.append(TokenFate(token, kind, None, q, r.p_emitted[j], None, residual))
    return fates


def opening_round(trace) -> int:
    """The round a finished run opens on: the first where a draft was refused (or rolled back), where
    the accept rule has something to show; else the first that drafted; else the last."""
    rounds = trace.rounds
    for wanted in (lambda r: r.rejected_at is not None, lambda r: bool(r.drafted)):
        found = next((r.index for r in rounds if wanted(r)), None)
        if found is not None:
            return found
    return max(len(rounds) - 1, 0)


def next_refusal(trace, index: int) -> int | None:
    """The next round after ``index`` with a refused (or rolled back) draft, from the start again after
    the last; None when the run has none."""
    refused = [r.index for r in trace.rounds if r.rejected_at is not None]
    if not refused:
        return None
    return next((i for i in refused if i > index), refused[0])


def fate_counts(r, plain: str = "target") -> dict[str, int]:
    """How many tokens of each fate the round has (every fate listed, zeros included)."""
    counts = dict.fromkeys(FATES, 0)
    for f in round_fates(r, plain):
        counts[f.fate] += 1
    return counts


def tooltip(trace, r, f: TokenFate) -> str:
    """The hover text of one token: its fate, why, and the numbers the accept rule used."""
    greedy = trace.settings.temperature == 0
    head = f"{label(trace, f.token_id)} (id {f.token_id}) · round {r.index + 1}"
    lines = [head]
    if f.position is not None:
        lines.append(f"draft #{f.position + 1}: {f.fate}")
    else:
        lines.append(f"{f.fate}")
    lines.append(_numbers(f))
    lines.append(_reason(f, greedy, writer(trace).step))
    return "\n".join(line for line in lines if line)


def token_html(trace, round_index: int) -> str:
    """The view at ``round_index``: the prompt, the output of rounds before it (muted), the round
    itself coloured by fate (rejected and discarded drafts struck through, inline), and a legend."""
    if not trace.rounds:
        return _frame(trace, "<span class='tok-empty'>No rounds decoded yet.</span>", None)
    index = max(0, min(int(round_index), len(trace.rounds) - 1))
    spans = []
    plain = writer(trace).fate
    for r in trace.rounds[:index]:
        for token, kind, p in zip(r.emitted, r.emitted_kind, r.p_emitted):
            kind = plain if kind == "target" else kind
            title = f"{label(trace, token)} (id {token}) · round {r.index + 1} · {kind} · p = {p:.3f}"
            spans.append(_span(piece(trace, token), f"tok tok-{kind} tok-past", r.index, title))
    current = trace.rounds[index]
    for f in round_fates(current, plain):
        spans.append(_span(piece(trace, f.token_id), f"tok tok-{f.fate} tok-current", current.index,
                           tooltip(trace, current, f)))
    return _frame(trace, "".join(spans), current)


def legend_html(fates=SPECULATIVE_FATES, labels: dict | None = None) -> str:
    """Coloured swatches naming each fate (class ``swatch``, not ``tok``, so token counts stay exact);
    ``labels`` overrides a fate's words."""
    words = {**FATE_LABELS, **(labels or {})}
    items = "".join(
        f"<span class='legend-item' title='{html.escape(words[f])}'>"
        f"<span class='swatch swatch-{f}' style='background:{FATE_COLOURS[f]}'></span>{html.escape(words[f])}</span>"
        for f in fates
    )
    return f"<div class='tok-legend'>{items}</div>"


def round_caption(trace, r) -> str:
    """One line about a round: what was drafted, where it was rejected, how many tokens it gave."""
    n = len(trace.rounds)
    counts = fate_counts(r)
    parts = [f"Round {r.index + 1} of {n}"]
    if r.event == "target":
        parts.append(writer(trace).step)
    elif r.event == "no-draft":
        parts.append("the drafter proposed nothing: one target step")
    else:
        parts.append(f"{len(r.drafted)} drafted, {counts['accepted']} accepted")
        if r.rejected_at is not None:
            parts.append(f"rejected at draft #{r.rejected_at + 1}")
        if counts["discarded"]:
            parts.append(f"{counts['discarded']} discarded")
    parts.append(f"+{len(r.emitted)} token{'s' if len(r.emitted) != 1 else ''}")
    parts.append(f"{r.timing.total_s * 1000:.1f} ms")
    return " · ".join(parts)


# -- helpers ----------------------------------------------------------------------------------------


def _at(values, i):
    return values[i] if i < len(values) else None


def _numbers(f: TokenFate) -> str:
    parts = []
    if f.q is not None:
        parts.append(f"q = {f.q:.3f}")
    if f.p is not None:
        parts.append(f"p = {f.p:.3f}")
    if f.q and f.p is not None and f.position is not None:
        parts.append(f"p/q = {f.p / f.q:.3f}")
    if f.u is not None:
        parts.append(f"u = {f.u:.3f}")
    if f.residual is not None:
        parts.append(f"residual = {f.residual:.3f}")
    return " · ".join(parts)


def _reason(f: TokenFate, greedy: bool, step: str = "one autoregressive target step") -> str:
    if f.fate == "accepted":
        return "kept: it is the target's argmax" if greedy else "kept: u ≤ p/q"
    if f.fate == "rejected":
        return "refused: the target's argmax differs" if greedy else "refused: u > p/q"
    if f.fate == "discarded":
        return "never tested: it came after the rejected draft"
    if f.fate == "corrected":
        return ("the target's argmax at the rejected position" if greedy
                else "drawn from the residual norm(max(0, p − q))")
    if f.fate == "bonus":
        return "drawn from the target after every draft was accepted"
    return step


def _span(text: str, classes: str, round_index: int, tip: str) -> str:
    # ``data-tip``: the page's own tooltip (shown at once, ``ui/layout.TIP_JS``), not the browser's slow title
    tip = html.escape(tip, quote=True)
    return f"<span class='{classes}' data-round='{round_index}' data-tip='{tip}' aria-label='{tip}'>{inline_html(text)}</span>"


def _frame(trace, body: str, current) -> str:
    prompt = trace.prompt if trace.prompt is not None else " ".join(map(str, trace.prompt_ids))
    caption = f"<div class='tok-caption'>{html.escape(round_caption(trace, current))}</div>" if current else ""
    who = writer(trace)
    legend = legend_html(SPECULATIVE_FATES) if who.checked else legend_html(
        ("copy",), {"copy": f"copy — {who.name}'s own token: no target checked it (lossy)"})
    return (
        "<div class='tok-view'>"
        f"{legend}"
        f"{caption}"
        f"<div class='tok-prompt' title='the prompt'><span class='tok-prompt-label'>Prompt</span>"
        f"{html.escape(prompt)}</div>"
        f"<div class='tok-output'>{body}</div>"
        "</div>"
    )


# Styles for the view; the page passes them to the component that shows it (scoped there).
TOKEN_CSS = """
.tok-view { font-size: 15px; line-height: 1.9; }
.tok-legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12px; color: #4b5563; margin-bottom: 6px; }
.legend-item { display: inline-flex; align-items: center; gap: 5px; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 3px; }
.swatch-rejected, .swatch-discarded { opacity: 0.85; }
.tok-caption { font-size: 13px; font-weight: 600; color: #374151; margin: 2px 0 6px; }
.tok-prompt { font-size: 13px; color: #6b7280; background: #f3f4f6; border-radius: 6px; padding: 4px 8px;
  margin-bottom: 8px; white-space: pre-wrap; max-height: 7.5em; overflow-y: auto; line-height: 1.5; }
.tok-prompt-label { font-weight: 600; margin-right: 8px; color: #4b5563; }
.tok-output { white-space: pre-wrap; word-break: break-word; font-family: ui-monospace, SFMono-Regular, Menlo, monospace;
  font-size: 14px; max-height: 420px; overflow-y: auto; padding: 6px 2px; }
.tok { border-radius: 3px; padding: 1px 0; margin: 0 1px; cursor: help; color: #111827; }
.tok-current { color: #ffffff; font-weight: 600; padding: 2px 1px; box-shadow: 0 1px 2px rgba(0,0,0,0.25); }
.tok-current.tok-rejected { text-decoration: line-through; text-decoration-thickness: 2px; }
.tok-current.tok-bonus, .tok-current.tok-copy { color: #111827; }  /* dark text on the yellow and the orange */
.tok-current.tok-discarded { text-decoration: line-through; font-style: italic; opacity: 0.85; }
.tok-empty { color: #6b7280; font-style: italic; font-family: ui-sans-serif, system-ui, sans-serif; }
""" + "".join(f".tok-current.tok-{fate} {{ background: {colour}; }}\n" for fate, colour in FATE_COLOURS.items()) \
  + "".join(f".tok-past.tok-{fate} {{ background: {tint(FATE_COLOURS[fate], 0.16)}; }}\n"  # earlier rounds: faded, same hue
            for fate in ("accepted", "corrected", "bonus", "target", "copy"))
