"""One round, step by step: the guided view of the Understand tab, on the user's own run.

Leviathan et al.'s Algorithm 1 in four steps, each drawn from the round's own record:

1. **Draft**: the drafter proposes γ tokens one after another (q: its probability of each).
2. **Verify**: the target reads the context and all γ drafts in *one* forward pass and so has its own
   probability p at every drafted position and one beyond.
3. **Accept or reject**: drafts are tested in order; sampling keeps x_i when u_i ≤ p(x_i)/q(x_i), greedy
   when x_i is the target's top token; the first refused draft ends the tests, later ones are discarded.
4. **Correct or bonus**: the target adds one token of its own: drawn from the residual norm(max(0, p − q))
   after a rejection (greedy: its top token), or from p beyond the last draft when all were accepted.

``guided_round_html(trace, round_index, step)`` shows steps 1 … ``step`` (the newest fades in).
"""

from __future__ import annotations

import html

from .style import FATE_COLOURS
from .text import label
from .tokens import round_fates
from .writer import writer

STEPS = ("Draft", "Verify in one pass", "Accept or reject", "Correct or bonus")
CONTEXT_TOKENS = 10  # output tokens shown before the round, for context

GUIDE_CSS = """
.guide { font-size: 14px; line-height: 1.5; }
.guide-head { font-weight: 600; margin-bottom: 6px; }
.guide-steps { display: flex; gap: 6px; margin: 6px 0 10px; flex-wrap: wrap; }
.guide-pill { border: 1px solid #cbd5e1; border-radius: 999px; padding: 2px 10px; font-size: 12px; color: #64748b; }
.guide-pill.done { background: #e0e7ff; color: #1e3a8a; border-color: #a5b4fc; }
.guide-pill.now { background: #2563eb; color: #fff; border-color: #2563eb; }
.guide-step { border: 1px solid #e5e7eb; border-radius: 8px; padding: 8px 12px; margin: 8px 0; background: #fff; }
.guide-step.new { animation: guide-in 0.6s ease-out; border-color: #93c5fd; }
@keyframes guide-in { from { opacity: 0; transform: translateY(6px); } to { opacity: 1; transform: none; } }
.guide-step h4 { margin: 0 0 4px; font-size: 14px; }
.guide-chip { display: inline-block; font-family: ui-monospace, monospace; border-radius: 4px; padding: 1px 5px;
  margin: 2px; background: #f1f5f9; border: 1px solid #cbd5e1; white-space: pre; }
.guide-chip small { font-family: ui-sans-serif, system-ui; color: #475569; margin-left: 4px; }
.guide-context { color: #64748b; font-family: ui-monospace, monospace; white-space: pre-wrap; }
.guide table { border-collapse: collapse; margin-top: 4px; }
.guide td, .guide th { padding: 2px 12px 2px 0; text-align: left; white-space: nowrap; font-size: 13px;
  border: none; border-bottom: 1px solid #e5e7eb; background: none; }
/* the test's words wrap and a long token is cut (whole in steps 1 and 2 above), so the verdict beside them stays
   in view on a phone (it was cut off at 390 px, #42) */
.guide td:nth-child(3) { white-space: normal; min-width: 6em; }
.guide td .guide-chip { max-width: 7em; overflow: hidden; text-overflow: ellipsis; vertical-align: bottom; }
.guide table { display: table; width: 100%; }
@media (max-width: 480px) { .guide td, .guide th { padding-right: 6px; } }
.guide .verdict-accepted { color: #15803d; font-weight: 600; }
.guide .verdict-rejected { color: #b91c1c; font-weight: 600; }
.guide .verdict-discarded { color: #6b7280; }
"""


def guided_round_html(trace, round_index: int, step: int = len(STEPS)) -> str:
    """Steps 1 … ``step`` of the chosen round (``step`` clipped to 1 … 4)."""
    if trace is None or not trace.rounds:
        return ("<div class='guide'><div class='guide-head'>One round, step by step</div>Run a prompt in the Watch "
                "tab (or upload a trace): this view then walks through the round you select there.</div>")
    r = trace.rounds[max(0, min(int(round_index), len(trace.rounds) - 1))]
    step = max(1, min(int(step), len(STEPS)))
    pills = "".join(f"<span class='guide-pill {'now' if i + 1 == step else 'done' if i + 1 < step else ''}'>"
                    f"{i + 1} · {name}</span>" for i, name in enumerate(STEPS))
    head = (f"<div class='guide-head'>Round {r.index + 1} of {len(trace.rounds)}, step by step</div>"
            f"<div class='guide-steps'>{pills}</div>{_context(trace, r)}")
    who = writer(trace)
    if not who.checked:  # the low-bit copy decoding alone: no draft, no target, nothing to accept
        token = _chip(trace, r.emitted[0], None, FATE_COLOURS["copy"]) if r.emitted else ""
        body = _card("No draft, no verification", True,
                     f"This run is {who.name} decoding alone, as a quantised model is served: one step of the copy "
                     f"gave {token}, and no target checked it, so its text can part from the target's (the status "
                     "says where). Run <b>quantized</b> with the copy's role <i>draft</i> to see the same copy "
                     "draft for the target, every token checked.")
        return f"<div class='guide' data-step='{step}' data-round='{r.index}'>{head}{body}</div>"
    if not r.drafted:
        body = _card("This round had no draft", True,
                     "The drafter proposed nothing here (or the method ran the target alone), so the target produced "
                     f"one token, {_chip(trace, r.emitted[0]) if r.emitted else ''}, like plain decoding. Pick a round "
                     "with drafts in the Watch tab (<b>Next refusal »</b> jumps to one).")
        return f"<div class='guide' data-step='{step}' data-round='{r.index}'>{head}{body}</div>"
    cards = [_draft(trace, r), _verify(trace, r), _accept(trace, r), _finish(trace, r)]
    body = "".join(_card(f"{i + 1} · {STEPS[i]}", i + 1 == step, cards[i]) for i in range(step))
    return f"<div class='guide' data-step='{step}' data-round='{r.index}'>{head}{body}</div>"


def _context(trace, r) -> str:
    before = [t for x in trace.rounds[: r.index] for t in x.emitted][-CONTEXT_TOKENS:]
    text = "".join(html.escape(trace.token_text.get(int(t), f"⟨{int(t)}⟩")) for t in before)
    return f"<div>Context so far: <span class='guide-context'>…{text}</span></div>" if before else \
        "<div>Context so far: the prompt (this is the first round).</div>"


def _draft(trace, r) -> str:
    chips = "".join(_chip(trace, t, f"q {q:.2f}") for t, q in zip(r.drafted, r.q_drafted))
    who = html.escape(trace.draft or trace.method)
    chain = _chain_forwards(r)
    if chain:
        how = f"through its chain, smallest level first ({chain}; {1000 * r.timing.draft_s:.1f} ms)"
    elif r.draft_forwards == 0:  # prompt lookup copies; BiTA's masks draft inside the target's own pass
        how = f"without a model step of its own ({1000 * r.timing.draft_s:.1f} ms)"
    else:
        how = (f"one after another ({r.draft_forwards} draft step{'s' if r.draft_forwards != 1 else ''}, "
               f"{1000 * r.timing.draft_s:.1f} ms)")
    return (f"The drafter ({who}) proposed <b>{len(r.drafted)}</b> tokens {how}. q is how likely the drafter found "
            f"each (1.00 for a token copied from the text so far):<div>{chips}</div>")


def _chain_forwards(r) -> str:
    """A chain's forwards per level in words ("prompt-lookup:3 0 forwards, int4 6 forwards"), smallest level first;
    "" for one draft. Why: a chain's ``draft_forwards`` counts its drafted tokens (c is then per drafted token)."""
    levels, forwards = (r.detail or {}).get("levels"), (r.detail or {}).get("level_forwards")
    if not levels or not forwards or len(levels) != len(forwards):
        return ""
    return ", ".join(f"{html.escape(str(name))} {n} forward{'s' if n != 1 else ''}" for name, n in zip(levels, forwards))


def _verify(trace, r) -> str:
    chips = "".join(_chip(trace, t, f"p {p:.2f} · q {q:.2f}") for t, p, q in zip(r.drafted, r.p_drafted, r.q_drafted))
    return (f"The target read the context and all {len(r.drafted)} drafts in <b>one</b> forward pass "
            f"({1000 * r.timing.verify_s:.1f} ms; plain decoding spends about that on one token). So it knows its "
            f"own probability p of every draft, and its distribution one position beyond:<div>{chips}</div>")


def _accept(trace, r) -> str:
    greedy = trace.settings.temperature == 0
    rows = []
    for f in round_fates(r):
        if f.position is None:
            continue
        i = f.position
        if f.fate == "discarded":
            test, verdict = "not tested: it came after a refused draft", "discarded"
        elif greedy:
            top = r.target_top[i][0][0] if i < len(r.target_top) and r.target_top[i] else None
            choice = "?" if top is None else html.escape(label(trace, top))
            test = f"the target's top token here is {choice}"
            verdict = f.fate
        else:
            ratio = f.p / f.q if f.q else float("inf")
            if f.u is None:
                test = f"p/q = {ratio:.2f}"
            else:
                test = f"u = {f.u:.2f} {'≤' if f.fate == 'accepted' else '>'} p/q = {min(ratio, 99):.2f}"
            verdict = f.fate
        mark = {"accepted": "✓ accepted", "rejected": "✗ rejected", "discarded": "– discarded"}[verdict]
        if r.event == "rollback" and verdict == "rejected":
            mark = "⟲ rolled back"
        rows.append(f"<tr><td>#{i + 1}</td><td>{_chip(trace, f.token_id)}</td><td>{test}</td>"
                    f"<td class='verdict-{verdict}'>{mark}</td></tr>")
    rule = ("Greedy: a draft is kept when it is the token the target itself would pick." if greedy else
            "Sampling: draw u uniform in [0, 1]; keep the draft when u ≤ p/q. A draft the target likes at least as "
            "much as the drafter (p ≥ q) is always kept.")
    kept = r.n_accepted
    return (f"{rule} Drafts are tested in order and the first refusal ends the tests. "
            f"<b>{kept} of {len(r.drafted)}</b> kept.<table><tr><th></th><th>draft</th><th>test</th><th></th></tr>"
            f"{''.join(rows)}</table>")


def _finish(trace, r) -> str:
    last = [f for f in round_fates(r) if f.position is None]
    greedy = trace.settings.temperature == 0
    words = []
    for f in last:
        chip = _chip(trace, f.token_id, None, FATE_COLOURS.get(f.fate))
        if f.fate == "corrected":
            how = ("its own top token" if greedy else
                   "drawn from the residual norm(max(0, p − q)), the part of p the draft under-covered"
                   + (f" (residual probability {f.residual:.2f})" if f.residual is not None else ""))
            keeps = "identical to plain decoding" if greedy else "distributed exactly as the target's own"
            words.append(f"In place of the refused draft the target wrote {chip}, {how}. That is what keeps the "
                         f"output {keeps}.")
        elif f.fate == "bonus":
            words.append(f"Every draft was kept, so the target's distribution one position beyond the last draft "
                         f"(already computed in the same pass) gives a <b>bonus</b> token for free: {chip}.")
        else:
            words.append(f"The target added {chip}.")
    n = len(r.emitted)
    drafting = _chain_forwards(r) or f"{r.draft_forwards} draft step{'s' if r.draft_forwards != 1 else ''}"
    words.append(f"<b>This round: {n} token{'s' if n != 1 else ''} for one target pass</b> and {drafting} "
                 f"({1000 * r.timing.total_s:.1f} ms); plain decoding "
                 f"would have needed {n} target pass{'es' if n != 1 else ''}.")
    return " ".join(words)


def _card(title: str, new: bool, body: str) -> str:
    return f"<div class='guide-step{' new' if new else ''}'><h4>{title}</h4>{body}</div>"


def _chip(trace, token_id: int, note: str | None = None, colour: str | None = None) -> str:
    style = f" style='border-color:{colour};box-shadow:inset 0 -3px 0 {colour}'" if colour else ""
    small = f"<small>{html.escape(note)}</small>" if note else ""
    return f"<span class='guide-chip'{style}>{html.escape(label(trace, token_id))}{small}</span>"
