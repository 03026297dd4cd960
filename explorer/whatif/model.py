"""The what-if maths: an ``Acceptance`` (the share a_i of drafts whose position i was accepted, i = 1 … K), the
tokens per target forward and the speed-up each draft length γ gives, the best γ, and what to change in words.

Every drafter here accepts a prefix (position i only if 1 … i − 1 were), so drafting γ ≤ K tokens with the same
drafter emits, per target forward,

    E(γ) = 1 + a_1 + … + a_γ                         (the bonus or correction token, plus the accepted)

and Leviathan et al.'s Theorem 3.8 with verification priced as measured gives the speed-up over plain
decoding

    S(γ) = E(γ) / (γ·c + T(γ+1)/T(1)),               S(0) = 1 (no speculation)

with c the draft's cost per token over a target forward. Under the paper's i.i.d. assumption
(Definition 3.1) a_i = α^i and E(γ) = (1 − α^(γ+1)) / (1 − α) (eq. 1); ``iid_alpha`` is the α that gives the
same mean acceptance length E(K), and the analysis shows both curves and how far they part.

The prices a user types (c, the T(n)/T(1) curve) are checked here. Plain Python: no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ExplorerError
from ..limits import MAX_GAMMA, clip

DEFAULT_DRAFT_COST = 0.05  # c assumed when neither the user nor the source gives one: a one-layer head on a 7B+ target
MAX_DRAFT_COST = 10.0

# What each engine calls γ, for the advice
KNOB = {
    "vLLM": "num_speculative_tokens", "llama.cpp": "--draft-max", "SGLang": "--speculative-num-steps",
    "explorer": "γ (--gamma)",
}


@dataclass(frozen=True)
class Acceptance:
    """One drafter's acceptance by draft position, as read from one source.

    ``share[i - 1]`` is a_i, the share of drafts whose position i was accepted (non-increasing, since a
    draft is accepted as a prefix). ``observed`` is False where the source gives only a mean and the
    shares are the i.i.d. fit α^i. ``draft_cost`` and ``verify_cost`` (T(n)/T(1), n = 1, 2, …) are the
    source's own measurements where it has them (the explorer's runs and reports)."""

    name: str
    engine: str  # a key of KNOB
    source: str  # how it was read, in words
    share: tuple[float, ...]
    observed: bool
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    draft_cost: float | None = None
    verify_cost: tuple[float, ...] | None = None

    @property
    def positions(self) -> int:
        return len(self.share)

    @property
    def conditional(self) -> tuple[float | None, ...]:
        """a_i / a_(i−1): the rate at position i among drafts whose earlier positions were all accepted
        (None where no draft got that far)."""
        before = (1.0, *self.share[:-1])
        return tuple(a / b if b > 0 else None for a, b in zip(self.share, before))

    @property
    def mean_length(self) -> float:
        """Mean acceptance length E(K): tokens per target forward, the bonus token included (vLLM's
        convention: 1 + accepted / drafts)."""
        return 1.0 + sum(self.share)


# -- the analysis ---------------------------------------------------------------------------------


def expected_tokens(share, gamma: int) -> float:
    """E(γ) = 1 + a_1 + … + a_γ: tokens per target forward when γ tokens are drafted."""
    return 1.0 + float(sum(share[:gamma]))


def iid_alpha(mean_length: float, positions: int) -> float:
    """The α at which K = ``positions`` i.i.d. drafts give ``mean_length`` tokens per forward:
    1 + α + … + α^K = E, solved by bisection (the left side rises with α from 1 to K + 1)."""
    if positions < 1:
        return 0.0
    target = min(max(float(mean_length), 1.0), positions + 1.0)
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if sum(mid ** i for i in range(positions + 1)) < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def verify_ratio(curve: tuple[float, ...] | None, n: int) -> float:
    """T(n)/T(1) from a curve given for n = 1, 2, …: flat (1, as on an accelerator with spare
    parallelism) without one, extended linearly past its end."""
    if not curve:
        return 1.0
    if n <= len(curve):
        return float(curve[n - 1])
    slope = curve[-1] - curve[-2] if len(curve) > 1 else 0.0
    return float(curve[-1] + slope * (n - len(curve)))


def speedups(share, draft_cost: float, curve) -> list[float]:
    """S(γ) = E(γ) / (γ·c + T(γ+1)/T(1)) for γ = 0 … K (S(0) = 1 when T(1)/T(1) = 1)."""
    return [expected_tokens(share, g) / (g * draft_cost + verify_ratio(curve, g + 1)) for g in range(len(share) + 1)]


def best_gamma(values: list[float]) -> int:
    """The γ of the highest speed-up; the shortest draft among equals (it costs less memory and risk)."""
    return max(range(len(values)), key=lambda g: (round(values[g], 12), -g))


def parse_verify_cost(text: str | None) -> tuple[float, ...] | None:
    """``1,1.05,1.1`` → T(n)/T(1) for n = 1, 2, 3; None or empty → flat (``check_verify_cost``'s rules)."""
    if text is None or not str(text).strip():
        return None
    raw = str(text)
    if len(raw) > 2000:
        raise ExplorerError(f"the verify cost has {len(raw)} characters; give at most {MAX_GAMMA + 1} numbers")
    try:
        values = tuple(float(x) for x in raw.split(",") if x.strip())
    except ValueError:
        raise ExplorerError(f"the verify cost must be comma-separated numbers T(n)/T(1) for n = 1, 2, …, e.g. "
                            f"1,1.05,1.1; got {clip(raw, 60)}") from None
    return check_verify_cost(values)


def check_verify_cost(values, what: str = "the verify cost") -> tuple[float, ...]:
    """T(n)/T(1) for n = 1, 2, … as the speed-up may divide by it: 1 to K + 1 numbers from 0.5 to 100, the first
    1 (it is T(1)/T(1)), none falling (running more tokens never costs less). A falling or zero curve would price
    a longer draft at nothing: a report's ``[0]`` or ``[1, 0.5]`` divided by zero."""
    values = tuple(values)
    if not values or len(values) > MAX_GAMMA + 1:
        raise ExplorerError(f"{what} needs 1 to {MAX_GAMMA + 1} values, got {len(values)}")
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0.5 <= v <= 100
           for v in values):
        raise ExplorerError(f"{what}: each T(n)/T(1) must be a number from 0.5 to 100")
    if abs(values[0] - 1.0) > 1e-9:
        raise ExplorerError(f"{what} starts at n = 1, where T(1)/T(1) = 1; got {values[0]:g}")
    if any(b < a - 1e-9 for a, b in zip(values, values[1:])):
        raise ExplorerError(f"{what} may not fall with n: checking more tokens never costs less")
    return tuple(float(v) for v in values)


def check_draft_cost(value) -> float | None:
    """c from the user: None (each drafter's own, else the default) or a number from 0 to 10."""
    if value is None:
        return None
    try:
        c = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past a float's range
        raise ExplorerError(f"the draft cost c must be a number (a draft token's time over a target forward's), "
                            f"got {clip(value, 40)}") from None
    if not math.isfinite(c) or not 0 <= c <= MAX_DRAFT_COST:
        raise ExplorerError(f"the draft cost c must be from 0 to {MAX_DRAFT_COST:g} (× one target forward), got {c:g}")
    return c


def analyse(acc: Acceptance, draft_cost: float | None = None, curve: tuple[float, ...] | None = None) -> dict:
    """Everything the CLI, the page and ``--json`` say about one drafter (plain data)."""
    c = draft_cost if draft_cost is not None else (acc.draft_cost if acc.draft_cost is not None else DEFAULT_DRAFT_COST)
    c_from = "given" if draft_cost is not None else ("measured" if acc.draft_cost is not None else "assumed")
    curve = curve if curve is not None else acc.verify_cost
    alpha = iid_alpha(acc.mean_length, acc.positions)
    iid_share = tuple(alpha ** i for i in range(1, acc.positions + 1))
    values = speedups(acc.share, c, curve)
    iid_values = speedups(iid_share, c, curve)
    best, iid_best = best_gamma(values), best_gamma(iid_values)
    return {
        "name": acc.name, "engine": acc.engine, "source": acc.source, "per_position_observed": acc.observed,
        "drafts": acc.drafts, "draft_tokens": acc.draft_tokens, "accepted_tokens": acc.accepted_tokens,
        "positions": acc.positions,
        "acceptance_by_position": list(acc.share), "conditional_by_position": list(acc.conditional),
        "mean_acceptance_length": acc.mean_length, "iid_alpha": alpha, "iid_acceptance_by_position": list(iid_share),
        "iid_largest_gap": max((abs(a - b) for a, b in zip(acc.share, iid_share)), default=0.0),
        "expected_tokens_by_gamma": [expected_tokens(acc.share, g) for g in range(acc.positions + 1)],
        "speedup_by_gamma": values, "iid_speedup_by_gamma": iid_values,
        "best_gamma": best, "best_speedup": values[best], "iid_best_gamma": iid_best,
        "draft_cost": c, "draft_cost_from": c_from,
        "verify_cost": [verify_ratio(curve, n) for n in range(1, acc.positions + 2)], "verify_cost_flat": not curve,
    }


def advice(result: dict) -> str:
    """What to change, in plain words, from one ``analyse`` result."""
    k, best, c = result["positions"], result["best_gamma"], result["draft_cost"]
    share, values = result["acceptance_by_position"], result["speedup_by_gamma"]
    knob = KNOB.get(result["engine"], "the draft length")
    pricing = (f"a draft token costing c = {c:.3g} of a target forward ({result['draft_cost_from']}) and "
               + ("checking γ + 1 tokens costing one forward (flat, as on a GPU with room to spare)"
                  if result["verify_cost_flat"] else "checking γ + 1 tokens priced by the T(n)/T(1) curve"))
    if best == 0:
        return (f"No draft length pays at {pricing}: even position 1, accepted in {share[0]:.0%} of drafts, costs "
                f"more than it brings. Speculation slows this workload down; turn it off or use a cheaper draft "
                f"(n-gram or prompt lookup, c ≈ 0).")
    head = f"With {pricing}, the best draft length is γ = {best} (×{values[best]:.2f} over no speculation"
    if best < k:
        extra = (f"position {k} is accepted in only {share[best]:.0%} of drafts, too few to pay for its draft token "
                 "and the longer check" if best + 1 == k else
                 f"positions {best + 1}–{k} are accepted in at most {share[best]:.0%} of drafts, too few to pay for "
                 "their draft tokens and the longer check")
        return f"{head}; ×{values[k]:.2f} at γ = {k}, the longest draft in the data): {extra}. Set {knob} to {best}."
    tail = (f"{head}): every position drafted pays, the last ({k}) still accepted in {share[-1]:.0%} of drafts. "
            f"A longer draft may pay too; the data cannot say (no draft went past {k})")
    if result["iid_best_gamma"] < k or not result["per_position_observed"]:
        return tail + "."
    return tail + f"; under the i.i.d. fit (α = {result['iid_alpha']:.2f}) try {knob} = {k + 1}–{k + 2}."


def explain(result: dict) -> str:
    """The numbers of one result in plain words (no markup)."""
    share, cond = result["acceptance_by_position"], result["conditional_by_position"]
    shown = ", ".join(f"{a:.0%}" for a in share[:8]) + (", …" if len(share) > 8 else "")
    lines = []
    if result["per_position_observed"]:
        drafts = f" of {result['drafts']:,.0f} drafts" if result["drafts"] else ""
        lines.append(f"Accepted by position 1…{len(share)}{drafts}: {shown}; given the positions before it were "
                     "accepted: " + ", ".join("–" if r is None else f"{r:.0%}" for r in cond[:8])
                     + (", …" if len(cond) > 8 else "") + ".")
    else:
        lines.append(f"This source ({result['source']}) gives only a mean acceptance length, not acceptance by "
                     f"position: the shares "
                     f"below are the i.i.d. fit ({shown}). vLLM's per-position counters would show whether late "
                     "positions collapse.")
    gap = result["iid_largest_gap"]
    lines.append(f"Mean acceptance length {result['mean_acceptance_length']:.2f} tokens per target forward; one "
                 f"i.i.d. rate α = {result['iid_alpha']:.2f} gives the same length"
                 + (f" but misses position by position by up to {gap * 100:.0f} percentage points and would pick γ = "
                    f"{result['iid_best_gamma']} instead of {result['best_gamma']}."
                    if result["per_position_observed"] and result["iid_best_gamma"] != result["best_gamma"] else
                    f", within {gap * 100:.0f} percentage points at every position." if result["per_position_observed"] else "."))
    lines.append(advice(result))
    return "\n".join(lines)


def analyse_all(drafters: list[Acceptance], draft_cost=None, verify_cost: tuple[float, ...] | None = None) -> dict:
    """``--json``'s document: one result per drafter, and the prices used."""
    return {"drafters": [analyse(a, draft_cost, verify_cost) for a in drafters],
            "draft_cost": draft_cost, "verify_cost": list(verify_cost) if verify_cost else None}
