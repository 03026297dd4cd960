"""Why a run was as fast (or as slow) as it was, in plain words from its own numbers.

A round of a speculative method drafts, verifies once and emits some tokens; plain decoding emits one
token per step. Measured in plain steps S (the autoregressive baseline's seconds per token on the same
prompt and settings), a run's speed-up is exactly

    speed-up = (tokens per round) / (cost of a round in plain steps)
             = tokens per round / (drafting + verification + bookkeeping, each in S)

so a round pays only when the tokens it yields beyond the one a plain step would have made outweigh
what it costs beyond one plain step. Beside this identity: Leviathan et al.'s Theorem 3.8 at the run's
α̂, mean γ and c, as written (verification priced like one step) and priced with the run's own
T(k)/T(1) (one verification of k tokens against one plain forward, both measured in these runs).

Every figure here that weighs the run against plain decoding is a ratio of two runs' clocks, so none is
printed where the two were not timed alike (``trust``): the explanation then says so and keeps to what
the run's own clocks tell.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import theory
from .trust import measured_speedup, speedup_doubt, verify_ratio_doubt


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


def speed_explanation(trace, baseline=None) -> str:
    """Markdown: what this run's speed-up is made of, and what the theory says at its numbers."""
    if trace is None or not trace.rounds:
        return ""
    s = trace.summary
    if trace.method == "ar":
        return ("**Why this speed.** Plain decoding: one target forward per token "
                f"({1000 * s.wall_s / max(1, s.new_tokens):.1f} ms a token here). Every other method is measured "
                "against this run on the same prompt and settings.")
    cost = round_cost(trace, baseline)
    if cost is None:
        if s.stop_reason == "stopped":
            return ("**Why this speed.** This run was stopped, so there is no plain-decoding run to weigh it against "
                    "(a run that ends gets one, on the same prompt and settings, right after it).")
        return ("**Why this speed.** The comparison with plain decoding appears once plain decoding has run on the "
                "same prompt and settings, at the machine's current pace (right after a run that ends).")
    doubt = speedup_doubt(trace, baseline)
    if doubt is not None:
        return f"**Why this speed.** {doubt.words}\n\n{_own_clocks(trace)}"
    measured = measured_speedup(trace, baseline)
    lines = [
        f"**Why this speed.** A plain decoding step took {1000 * baseline.summary.wall_s / baseline.summary.new_tokens:.1f} ms "
        f"here. An average round of this run cost **{cost.cost:.2f} plain steps** — drafting {cost.drafting:.2f}, "
        f"verifying {cost.verifying:.2f}, bookkeeping outside the models {cost.bookkeeping:.2f} — and yielded "
        f"**{cost.tokens:.2f} tokens**: {cost.tokens:.2f} / {cost.cost:.2f} = **×{cost.speedup:.2f}** plain decoding"
        + (f" (measured ×{measured:.2f})." if measured is not None and abs(measured - cost.speedup) > 0.005 else "."),
        _verdict(cost),
    ]
    impossible = None
    if cost.verify_ratio is not None and cost.verify_tokens is not None:
        # k is a mean over rounds: "T(1)/T(1) = 1.65" (1.4 rounded) read as a contradiction
        k = cost.verify_tokens
        shown = f"{k:.0f}" if abs(k - round(k)) < 0.05 else f"{k:.1f}"
        impossible = verify_ratio_doubt(cost.verify_ratio, k)
        if impossible:  # "T(1.1)/T(1) = 0.05" was printed as a fact
            lines.append(f"One verification ran {k:.1f} tokens through the target; its cost against a one-token "
                         f"forward {impossible}, so it is not shown, nor the theory priced with it.")
        else:
            lines.append(f"One verification ran {k:.1f} tokens through the target and cost "
                         f"{cost.verify_ratio:.2f}× a one-token forward (T({shown})/T(1) = "
                         f"{cost.verify_ratio:.2f} on this machine, k = {shown} tokens on average; on a GPU it is "
                         "close to 1).")
    lines += _theorem(trace, cost if not impossible else dataclasses.replace(cost, verify_ratio=None), measured)
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


def _theorem(trace, cost: RoundCost, measured: float | None) -> list[str]:
    """Theorem 3.8 at this run's α̂, mean γ and c: as written, and priced with its T(k)/T(1)."""
    s = trace.summary
    if s.alpha_hat is None or s.c_measured is None or s.mean_gamma <= 0 or s.predicted_speedup is None:
        return []
    alpha = min(s.alpha_hat, 1.0)
    words = (f"Theory (Leviathan et al., Theorem 3.8) at this run's acceptance α̂ = {alpha:.2f}, "
             f"γ = {s.mean_gamma:.1f} drafts a round and draft cost c = {s.c_measured:.3f} of a target forward "
             f"predicts ×{s.predicted_speedup:.2f} if a verification cost one step")
    if cost.verify_ratio is not None:
        priced = float(theory.speedup_with_verify_cost(alpha, s.mean_gamma, s.c_measured, cost.verify_ratio))
        words += f", ×{priced:.2f} at the verification cost measured here"
    if measured is not None:
        words += f"; measured ×{measured:.2f}. The theorem leaves out the bookkeeping outside the models " \
                 f"({cost.bookkeeping:.2f} plain steps a round here)"
        idle = sum(not r.drafted for r in trace.rounds)
        if idle:
            words += (f", and it assumes every round drafts, where {idle} of this run's {len(trace.rounds)} rounds "
                      "drafted nothing (each gave one token, like a plain step)")
    return [words + "."]
