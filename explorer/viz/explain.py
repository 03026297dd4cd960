"""Why a run was as fast (or as slow) as it was, in plain words from its own numbers.

A round of a speculative method drafts, verifies once and emits some tokens; plain decoding emits one
token per step. Measured in plain steps S (the autoregressive baseline's seconds per token on the same
prompt and settings), a run's speed-up is exactly

    speed-up = (tokens per round) / (cost of a round in plain steps)
             = tokens per round / (drafting + verification + bookkeeping, each in S)

so a round pays only when the tokens it yields beyond the one a plain step would have made outweigh
what it costs beyond one plain step. Beside this identity: Leviathan et al.'s Theorem 3.8 at the run's
α̂ and mean γ, with the round's costs taken from the same ledger (a draft step and a verification in plain
steps), so the theorem and the measured figure can differ only by what the theorem leaves out (bookkeeping,
and real rounds against its i.i.d. acceptance) — the page once printed "measured ×1.99" beside the theorem's
×1.08, whose c was a draft step against a *verification* of 12 tokens in a few rounds, not against a plain
step (#48).

Before any of it, on every run, with or without plain decoding to weigh it against: what decided the speed
in plain words — how many drafts were accepted, tokens per target pass, what drafting cost (``drivers``) —
and, where this session ran other methods on the same prompt and settings, why this one was faster or slower
than each (``against_others``). The target's low-bit copy decoding alone has no drafts and no target: it is
explained as what it is (``writer``).

Every figure here that weighs the run against plain decoding is a ratio of two runs' clocks, so none is
printed where the two were not timed alike (``trust``): the explanation then says so and keeps to what
the run's own clocks tell.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import theory
from ..quality import first_divergence, token_agreement
from ..words import plural
from .trust import measured_speedup, speedup_doubt, verify_ratio_doubt
from .views import words_for
from .writer import copy_bits, writer


@dataclass(frozen=True)
class RoundCost:
    """A run's rounds in plain steps: what one round yields and costs, on average."""

    tokens: float        # tokens emitted per round
    drafting: float      # plain steps of drafting per round
    verifying: float     # plain steps of target verification per round
    bookkeeping: float   # plain steps outside the models (sampling, accept tests, records) per round
    verify_ratio: float | None  # T(k)/T(1): one verification forward against one plain forward
    verify_tokens: float | None  # k: tokens a verification forward ran, on average

    @property
    def cost(self) -> float:
        return self.drafting + self.verifying + self.bookkeeping

    @property
    def speedup(self) -> float:
        return self.tokens / self.cost if self.cost > 0 else float("nan")


def round_cost(trace, baseline) -> RoundCost | None:
    """``trace``'s average round in the baseline's plain steps; None without rounds or a usable baseline.

    The whole runs' totals (prefill included on both sides) keep ``speedup`` equal to the measured
    tokens/s ratio; T(k)/T(1) uses the rounds after the first (whose forward also ran the prompt)."""
    s, b = trace.summary, baseline.summary if baseline is not None else None
    if not trace.rounds or b is None or not b.new_tokens or b.wall_s <= 0 or s.wall_s <= 0:
        return None
    step = b.wall_s / b.new_tokens
    n = len(trace.rounds)
    other = max(0.0, s.wall_s - s.draft_s - s.verify_s)
    ratio = k = None
    ours = [r for r in trace.rounds[1:] if r.target_forwards]
    theirs = [r for r in baseline.rounds[1:] if r.target_forwards]
    if ours and theirs:
        one = sum(r.timing.verify_s for r in theirs) / sum(r.target_forwards for r in theirs)
        per_pass = sum(r.timing.verify_s for r in ours) / sum(r.target_forwards for r in ours)
        ratio = per_pass / one if one > 0 else None
        k = sum(_verified_tokens(r) for r in ours) / len(ours)
    return RoundCost(tokens=s.new_tokens / n, drafting=s.draft_s / n / step, verifying=s.verify_s / n / step,
                     bookkeeping=other / n / step, verify_ratio=ratio, verify_tokens=k)


def _verified_tokens(r) -> int:
    """Tokens one verification ran: the drafts and one more, or a BiTA round's whole tree and masks."""
    if r.tree and isinstance(r.tree.get("positions"), (list, tuple)):
        return len(r.tree["positions"]) + 1
    return len(r.drafted) + 1


def speed_explanation(trace, baseline=None, others=()) -> str:
    """Markdown: what decided this run's speed (``drivers``), what its speed-up over plain decoding is made of,
    what the theory says at its numbers, and — ``others``: this session's runs of other methods on the same
    prompt and settings — why it was faster or slower than each."""
    if trace is None or not trace.rounds:
        return ""
    s = trace.summary
    if trace.method == "ar":
        return ("**Why this speed.** Plain decoding: one target forward per token "
                f"({1000 * s.wall_s / max(1, s.new_tokens):.1f} ms a token here). Every other method is measured "
                "against this run on the same prompt and settings.")
    if not writer(trace).checked:
        return _copy_alone(trace, baseline)
    head = "**Why this speed.**"
    decided = drivers(trace)
    versus = against_others(trace, baseline, others)
    cost = round_cost(trace, baseline)
    if cost is None:
        if s.stop_reason == "stopped":
            return _join(f"{head} This run was stopped, so there is no plain-decoding run to weigh it against (a run "
                         "that ends gets one, on the same prompt and settings, right after it).", decided, versus)
        return _join(f"{head} The comparison with plain decoding appears once plain decoding has run on the same "
                     "prompt and settings, at the machine's current pace (right after a run that ends).", decided, versus)
    doubt = speedup_doubt(trace, baseline)
    if doubt is not None:
        return _join(f"{head} {doubt.words}", decided, _own_clocks(trace), versus)
    measured = measured_speedup(trace, baseline)
    lines = [
        f"{head} A plain decoding step took {1000 * baseline.summary.wall_s / baseline.summary.new_tokens:.1f} ms "
        f"here. An average round of this run cost **{cost.cost:.2f} plain steps** — drafting {cost.drafting:.2f}, "
        f"verifying {cost.verifying:.2f}, bookkeeping outside the models {cost.bookkeeping:.2f} — and yielded "
        f"**{cost.tokens:.2f} tokens**: {cost.tokens:.2f} / {cost.cost:.2f} = **×{cost.speedup:.2f}** plain decoding"
        + (f" (measured ×{measured:.2f})." if measured is not None and abs(measured - cost.speedup) > 0.005 else "."),
        _verdict(cost),
        decided,
    ]
    if cost.verify_ratio is not None and cost.verify_tokens is not None:
        # k is a mean over rounds: "T(1)/T(1) = 1.65" (1.4 rounded) read as a contradiction
        k = cost.verify_tokens
        shown = f"{k:.0f}" if abs(k - round(k)) < 0.05 else f"{k:.1f}"
        impossible = verify_ratio_doubt(cost.verify_ratio, k)
        if impossible:  # "T(1.1)/T(1) = 0.05" was printed as a fact
            lines.append(f"One verification ran {k:.1f} tokens through the target; its cost against a one-token "
                         f"forward {impossible}, so it is not shown.")
        else:
            lines.append(f"One verification ran {k:.1f} tokens through the target and cost "
                         f"{cost.verify_ratio:.2f}× a one-token forward (T({shown})/T(1) = "
                         f"{cost.verify_ratio:.2f} on this machine, k = {shown} tokens on average, the rounds after "
                         f"the first). {_what_a_pass_costs(trace)}")
    lines += _theorem(trace, baseline, cost, measured)
    return _join(*lines, versus)


def _what_a_pass_costs(trace) -> str:
    """Why a verification of k tokens costs what it does on this run's device, in plain words: on a CPU the
    arithmetic grows with the tokens; on a GPU a small model's forward is launches and one read of the weights."""
    if str(trace.device).startswith("cuda"):
        return ("On a GPU a small model's forward is not arithmetic: it is launching a few hundred small kernels "
                "(replayed as one CUDA graph where the explorer captured one) and reading every weight once, and "
                "both are the same for one token as for several, so a pass of a few tokens costs little more "
                "than one.")
    return ("On a CPU the arithmetic grows with the tokens a pass runs, beside reading every weight once; on a "
            "GPU, where a small model's forward is kernel launches and that one read, it stays close to 1.")


def _join(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p)


def drivers(trace) -> str:
    """The three things that make a drafting run fast or slow, in plain words from its own numbers: how many
    drafts the target accepted, how many tokens each target pass kept, and what drafting cost."""
    s = trace.summary
    rounds = len(trace.rounds)
    passes = s.target_forwards or rounds
    per_pass = s.new_tokens / passes if passes else 0.0
    if not s.drafted:
        return (f"Nothing was drafted in its {rounds} round{'s' if rounds != 1 else ''}, so each target pass gave one "
                "token, as plain decoding does, with the method's own work on top.")
    share = s.accepted / s.drafted
    total = s.draft_s + s.verify_s + s.other_s
    drafting = s.draft_s / total if total > 0 else 0.0
    tested = sum(r.tested for r in trace.rounds)
    untested = f", {s.accepted} of the {tested} the target tested" if 0 < tested < s.drafted else ""
    words = [f"**{s.accepted} of {s.drafted}** drafted tokens accepted ({share:.0%}{untested}), so each target pass "
             f"kept **{per_pass:.2f} tokens** (plain decoding: 1)"]
    relative = None  # a draft step against a target pass, both this run's own
    if s.draft_forwards and s.draft_s > 0 and s.verify_s > 0:
        step, verify = 1000 * s.draft_s / s.draft_forwards, 1000 * s.verify_s / passes
        relative = step / verify
        words.append(f"a draft step cost **{relative:.2f} of a target pass** ({step:.1f} against {verify:.1f} ms; "
                     f"drafting took {drafting:.0%} of the run's time)")
    else:
        words.append(f"drafting needed no model of its own ({drafting:.0%} of the run's time)")
    drafts_a_pass = s.drafted / passes if passes else 0.0
    if per_pass >= 3 and (relative is None or relative * drafts_a_pass < per_pass - 1):
        why = (f"The drafts are nearly always right, so one target pass does the work of {per_pass:.1f} plain steps, "
               "and drafting them costs less than the steps it saves: what makes a method fast.")
    elif per_pass >= 3:
        why = (f"The drafts are nearly always right, but a round's {drafts_a_pass:.1f} draft steps cost about "
               f"{relative * drafts_a_pass:.1f} target passes here, as much as the {per_pass - 1:.1f} extra tokens a "
               "pass keeps: the draft is too slow for this machine.")
    elif share < 0.5 and per_pass < 2:
        why = ("Most drafts were refused: a pass kept few tokens more than plain decoding's one, so the drafting and "
               "the wider verification are paid for little.")
    else:
        why = "A pass kept a few tokens; whether that pays depends on what drafting and a wider verification cost here."
    own = words_for(trace)  # the method's own sentence (a draft chain: which level paid for what)
    return "What decided it: " + "; ".join(words) + f". {why}" + (f" {own}" if own else "")


def against_others(trace, baseline, others) -> str:
    """Why this run was faster or slower than this session's runs of other methods on the same prompt and settings
    (``others``: (trace, baseline) pairs, newest last; at most three methods, each its newest run), from the same
    three numbers; their speeds are compared only where each ratio to plain decoding can be trusted."""
    mine = measured_speedup(trace, baseline)
    lines = []
    seen = set()
    for other, base in reversed(list(others)):
        key = (other.method, other.draft, other.settings.lossy)
        if other is trace or key == (trace.method, trace.draft, trace.settings.lossy) or key in seen:
            continue
        seen.add(key)
        o = other.summary
        name = f"`{other.method}`" + (f" ({other.draft})" if other.draft else "")
        facts = (f"{o.accepted} of {o.drafted} drafts accepted, {o.tokens_per_target_forward or 1:.2f} tokens a target "
                 "pass" if o.drafted else "no drafts")
        theirs = measured_speedup(other, base)
        if mine is not None and theirs is not None:
            faster = mine >= theirs
            pace = f"×{theirs:.2f} plain decoding against this run's ×{mine:.2f}"
            lines.append(f"- Your {name} run on this prompt: {facts}; {pace}. This run was "
                         f"{'faster' if faster else 'slower'}: " + _because(trace.summary, o, faster))
        else:
            lines.append(f"- Your {name} run on this prompt: {facts} (its speed and this one's were not both measured "
                         "at a steady pace, so only these numbers are compared).")
        if len(seen) == 3:
            break
    return ("**Against your other runs of this prompt.**\n" + "\n".join(lines)) if lines else ""


def _because(ours, theirs, faster: bool) -> str:
    """Which of the drivers explains the order of two runs."""
    mine, other = ours.tokens_per_target_forward or 1.0, theirs.tokens_per_target_forward or 1.0
    if faster == (mine > other):
        return (f"each of its target passes kept {mine:.2f} tokens against {other:.2f}"
                + (f" ({ours.accepted}/{ours.drafted} drafts accepted against {theirs.accepted}/{theirs.drafted})."
                   if ours.drafted and theirs.drafted else "."))
    return (f"{'though' if faster else 'even though'} its passes kept {mine:.2f} tokens against {other:.2f}, its "
            f"rounds cost {'less' if faster else 'more'} (drafting {ours.draft_s / max(ours.wall_s, 1e-9):.0%} of its "
            f"time against {theirs.draft_s / max(theirs.wall_s, 1e-9):.0%}).")


def _kept_words(parts: int) -> str:
    """How much of the target's text the copy wrote before it parted: "It wrote the target's own first 6 tokens"."""
    if parts == 0:
        return "It chose another token than the target's at once"
    return f"It wrote the target's own first {'token' if parts == 1 else plural(parts, 'token')}"


def _copy_alone(trace, baseline) -> str:
    """The target's low-bit copy decoding by itself: one step of the copy per token, no draft, no verification;
    faster because a step reads its weights in fewer bits, and lossy."""
    s = trace.summary
    who = writer(trace)
    bits = copy_bits(trace)
    share = {"4-bit": "an eighth", "8-bit": "a quarter"}.get(bits, "a fraction")
    lines = [f"**Why this speed.** {who.name.capitalize()} decoded alone: one step of the copy per token, nothing "
             f"drafted and nothing verified ({1000 * s.wall_s / max(1, s.new_tokens):.1f} ms a token here). A step "
             f"reads the target's own weights in {bits[0]} bits, {share} of the float32 target's bytes, which is "
             "where a step on a CPU spends its time."]
    doubt = speedup_doubt(trace, baseline)
    measured = measured_speedup(trace, baseline)
    if baseline is not None and doubt is not None:
        lines.append(doubt.words)
    elif measured is not None:
        lines.append(f"Plain decoding took {1000 * baseline.summary.wall_s / max(1, baseline.summary.new_tokens):.1f} "
                     f"ms a token on the same prompt and settings: the copy ran **×{measured:.2f}** plain decoding"
                     + ("." if measured >= 1 else " — here its low-bit products cost more than the bytes they save."))
    if baseline is not None and baseline.output_ids:
        output, reference = list(trace.output_ids), list(baseline.output_ids)
        parts = first_divergence(output, reference)
        kept = token_agreement(output, reference)
        lines.append("The price: no target checked its text. " + (
            f"It matched plain decoding's {len(reference)} tokens exactly this time (a near-tie elsewhere can tip "
            "it)." if parts is None else
            f"{_kept_words(parts)}, then parted at token {parts + 1}; {kept:.0%} of its tokens stand where the "
            "target's do."))
    lines.append("Drafting with the same copy (`quantized`, the copy's role *draft*) keeps every token of the "
                 "target's text and most of this speed: the target checks a whole draft in one pass.")
    return "\n\n".join(lines)


def _own_clocks(trace) -> str:
    """What a run's own clocks say without plain decoding: a round's time, its split, its tokens."""
    s = trace.summary
    n = max(1, len(trace.rounds))
    total = s.draft_s + s.verify_s + s.other_s
    if total <= 0:
        return ""
    split = ", ".join(f"{name} {share:.0%}" for name, share in (("drafting", s.draft_s / total),
                                                                ("verifying", s.verify_s / total),
                                                                ("bookkeeping", s.other_s / total)))
    per_pass = f" ({s.tokens_per_target_forward:.2f} tokens per target pass)" if s.tokens_per_target_forward else ""
    return (f"What this run's own clocks say: an average round took {1000 * s.wall_s / n:.1f} ms — {split} — and "
            f"yielded {s.new_tokens / n:.2f} tokens{per_pass}.")


def _verdict(cost: RoundCost) -> str:
    """Which side of the ledger won, and by what: the extra tokens against the extra steps."""
    gained = cost.tokens - 1
    extras = {"drafting": cost.drafting, "verifying beyond one step": max(0.0, cost.verifying - 1),
              "bookkeeping": cost.bookkeeping}
    largest = max(extras, key=extras.get)
    spent = sum(extras.values())
    if cost.speedup >= 1:
        return (f"Faster than plain decoding: each round's {gained:.2f} extra tokens outweigh its {spent:.2f} extra "
                f"steps (most of them {largest}, {extras[largest]:.2f}).")
    why = {"drafting": "the draft is too costly for how often it is right",
           "verifying beyond one step": "verifying several tokens at once costs more than one step on this machine",
           "bookkeeping": "the work outside the models (sampling, accept tests) is large next to a forward"}[largest]
    return (f"Slower than plain decoding: each round's {gained:.2f} extra tokens do not pay for its {spent:.2f} extra "
            f"steps; the largest is {largest} ({extras[largest]:.2f} steps) — {why}.")


@dataclass(frozen=True)
class Theorem:
    """Theorem 3.8 at a run's own numbers, its costs in the same plain steps as the ledger (``round_cost``)."""

    alpha: float       # α̂, accepted ÷ tested
    gamma: float       # mean drafts a drafting round
    expected: float    # eq. 1: tokens a round at α̂ and γ, (1 − α^(γ+1)) / (1 − α)
    c: float           # a drafted token's drafting, in plain steps (Leviathan's c: draft time ÷ target step)
    verify: float      # one verification pass, in plain steps (T(k)/T(1), the first pass's prompt included)
    written: float     # the theorem as written: a verification costs one plain step
    priced: float      # with this run's verification cost


def theorem_at(trace, baseline) -> Theorem | None:
    """Theorem 3.8 at ``trace``'s α̂ and mean γ, with c and the verification's cost taken from the run against its
    plain decoding (whole runs, as the ledger); None without a baseline whose ratio can be trusted (then the
    trace's own c, against a verification pass, is all there is)."""
    s = trace.summary
    if (s.alpha_hat is None or s.mean_gamma <= 0 or not s.drafted or not s.target_forwards or trace.settings.lossy
            or measured_speedup(trace, baseline) is None):
        return None
    b = baseline.summary
    step = b.wall_s / b.new_tokens
    alpha = min(s.alpha_hat, 1.0)
    c = s.draft_s / s.drafted / step
    verify = s.verify_s / s.target_forwards / step
    expected = float(theory.expected_tokens(alpha, s.mean_gamma))
    return Theorem(alpha, s.mean_gamma, expected, c, verify, expected / (s.mean_gamma * c + 1),
                   expected / (s.mean_gamma * c + verify))


def _theorem(trace, baseline, cost: RoundCost, measured: float | None) -> list[str]:
    """Theorem 3.8 at this run's α̂ and mean γ, priced with the ledger's own draft and verification costs, so
    that it differs from the measured figure only by what the theorem leaves out."""
    s = trace.summary
    t = theorem_at(trace, baseline)
    if t is None:
        return []
    tokens = s.new_tokens / len(trace.rounds)
    words = (f"Theory (Leviathan et al., Theorem 3.8): at this run's acceptance α̂ = {t.alpha:.2f} and γ = "
             f"{t.gamma:.1f} drafts a round, a round should give {t.expected:.2f} tokens (this run's gave "
             f"{tokens:.2f}). Priced with this run's own costs — drafting c = {t.c:.3f} plain steps a drafted token, "
             f"a verification pass {t.verify:.2f} plain steps (the first also read the prompt) — it predicts "
             f"**×{t.priced:.2f}**; as the paper writes it, a verification costing one plain step, ×{t.written:.2f}")
    if measured is not None:
        words += f"; measured ×{measured:.2f}. What the theorem leaves out: bookkeeping outside the models " \
                 f"({cost.bookkeeping:.2f} plain steps a round here), and real rounds against its i.i.d. acceptance"
        idle = sum(not r.drafted for r in trace.rounds)
        if idle:
            words += (f"; it also assumes every round drafts, where {idle} of this run's {len(trace.rounds)} rounds "
                      "drafted nothing (each gave one token, like a plain step)")
    return [words + "."]

