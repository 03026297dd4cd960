"""Controllers that price drafting with measured costs: ``StepCosts`` (c, a draft step over a target step,
timed online, and the verify-cost curve T(k + 1)/T(1) of ``engine.costs``), ``cost-aware`` (the length of
highest expected tokens per second, Theorem 3.8 priced as measured) and the reproduction report's varying γ
(``dynamic-gamma``, by gradient ascent on Theorem 3.8's improvement). The Thompson-sampling rules' priced
variants (``thompson``) use ``StepCosts`` too.
"""

from __future__ import annotations

from typing import Any

from ... import theory
from ...errors import ExplorerError
from ...trace import Timing
from .schedules import WholeDraft


class StepCosts:
    """The measured prices of drafting, in target-step units: c (one draft step over one target step,
    both timed online from the rounds) and T(k + 1)/T(1), a verification of k drafts over a one-token
    target forward (``engine.costs``' curve, measured once per model and process). With them,
    Theorem 3.8 priced as measured, (1 − α^(k+1)) / ((1 − α)(k·c + T(k+1)/T(1))), gives the expected
    tokens per unit of time of a round that drafts k tokens (``theory.speedup_with_verify_cost``).
    Used by ``cost-aware`` and by the priced Thompson-sampling stop rules."""

    EMA = 0.2  # weight of the latest round in the step-time averages

    def __init__(self, gamma: int, verify_curve: tuple[float, ...]):
        if len(verify_curve) < gamma + 1:
            raise ExplorerError(f"the verify-cost curve covers {len(verify_curve)} tokens; γ + 1 = {gamma + 1} needed")
        self.gamma = gamma
        self.ratio = [t / verify_curve[0] for t in verify_curve]  # T(n)/T(1) for n = 1, 2, ...
        self.draft_step_s: float | None = None
        self.target_step_s: float | None = None
        self.rounds = 0

    @property
    def c(self) -> float:
        if self.draft_step_s is None or not self.target_step_s:
            return 0.0  # unknown yet: assume free drafts and let the measurement correct it
        return self.draft_step_s / self.target_step_s

    def rates(self, alpha: float, start: int = 0) -> list[float]:
        """Expected tokens per target-step time of a round that drafts k = start..γ tokens."""
        ks = range(start, self.gamma + 1)
        rates = theory.speedup_with_verify_cost(min(max(alpha, 0.0), 0.999), list(ks), self.c, self.ratio[start:self.gamma + 1])
        return [float(r) for r in rates]

    def best_length(self, alpha: float, start: int = 0) -> int:
        """The k in [start, γ] with the highest expected rate (the smallest such k on a tie)."""
        rates = self.rates(alpha, start)
        return start + max(range(len(rates)), key=rates.__getitem__)

    def observe(self, drafted: int, timing: Timing | None, draft_forwards: int) -> None:
        """Update c's two step times from a finished round."""
        if timing is not None and self.rounds > 0:  # the first round also runs the prompt: skip it
            self.target_step_s = _ema(self.target_step_s, timing.verify_s / self.ratio[min(drafted, self.gamma)])
            if draft_forwards:
                self.draft_step_s = _ema(self.draft_step_s, timing.draft_s / draft_forwards)
            elif drafted:  # a model-free draft (prompt lookup): its cost is the lookup itself
                self.draft_step_s = _ema(self.draft_step_s, timing.draft_s / drafted)
        self.rounds += 1


class CostAware(WholeDraft):
    """Draft the k in [0, γ] that maximises expected tokens per second, knowing the measured costs.

    Expected tokens of a round, (1 − α^(k+1)) / (1 − α) (Leviathan et al., eq. 1), over its expected
    time in target-step units, k·c + T(k+1)/T(1): Theorem 3.8 with verification priced by the measured
    verify-cost curve T (``engine.costs``). k = 0 (no draft, a plain target step) wins when drafting
    does not pay, so the method never falls far below ``ar``. c = the draft step's time over the target
    step's, both measured online.

    α is a discounted Beta estimate over the tested drafts, kept apart per kind of evidence the drafter
    reports (prompt lookup: the matched n-gram's size; model drafts: one estimate), because one global α
    mixes 1-gram matches that rarely pay with 3-gram matches that do. An estimate is discounted each
    time its evidence comes up, drafted or not, so a declined kind relaxes towards the optimistic prior
    and is re-tried: after one failure within ~3 offers, after ~20 failures only after ~45. A draft
    whose acceptance was measured offline (a trained exit's held-out agreement, ``prior_alpha``) starts
    from that instead of the optimistic prior, so a short run does not pay to learn what is known.
    """

    kind = "cost-aware"
    uses_evidence = True  # the round loop asks the drafter for evidence only for such a controller
    DISCOUNT = 0.95  # per offer of the same evidence: the last ~20 offers count
    PRIOR = (0.8, 0.2)  # Beta pseudo-counts (mean 0.8): optimistic, so every kind of evidence is tried

    def __init__(self, gamma: int, verify_curve: tuple[float, ...]):
        self.gamma = gamma
        self.costs = StepCosts(gamma, verify_curve)
        self.counts: dict[str | None, tuple[float, float]] = {}  # evidence -> (successes, failures)
        self.evidence: str | None = None  # what this round's draft rests on
        self.prior_alpha: float | None = None  # the draft's acceptance measured offline, if known

    def alpha_for(self, evidence: str | None) -> float:
        successes, failures = self.counts.get(evidence, (0.0, 0.0))
        a0, b0 = self.PRIOR
        if self.prior_alpha is not None and evidence is None:  # same weight, the measured mean
            a0, b0 = self.prior_alpha * (a0 + b0), (1 - self.prior_alpha) * (a0 + b0)
        return (successes + a0) / (successes + failures + a0 + b0)

    @property
    def alpha(self) -> float:
        """α for the evidence of the current round."""
        return self.alpha_for(self.evidence)

    @property
    def c(self) -> float:
        return self.costs.c

    def draft_length(self, evidence=None) -> int:
        self.evidence = evidence
        return self.costs.best_length(self.alpha_for(evidence))

    def update(self, drafted, accepted, timing=None, draft_forwards=0) -> dict[str, Any]:
        evidence = self.evidence
        before = {"alpha": self.alpha, "gamma": self.draft_length(evidence)}
        successes, failures = self.counts.get(evidence, (0.0, 0.0))
        successes = successes * self.DISCOUNT + accepted
        failures = failures * self.DISCOUNT + (1 if accepted < drafted else 0)  # nothing after a rejection is tested
        self.counts[evidence] = (successes, failures)
        self.costs.observe(drafted, timing, draft_forwards)
        record = {"kind": self.kind, "alpha_before": before["alpha"], "alpha_after": self.alpha,
                  "c": self.c, "gamma_before": before["gamma"], "gamma_after": self.draft_length(evidence)}
        return record if evidence is None else {**record, "evidence": evidence}


class DynamicGamma(WholeDraft):
    """The reproduction report's "varying γ": before each round, γ maximises Theorem 3.8's wall-time
    improvement (1 − α^(γ+1)) / ((1 − α)(γc + 1)) at the run's own α̂ and c, by gradient ascent on a
    continuous γ (``theory.gamma_by_ascent``, warm-started from the last round's optimum) and then the
    best whole length beside it, within [1, γ cap]. ``priced``: the verification costs the measured
    T(γ+1)/T(1) (``engine.costs``) instead of one step, what a CPU needs.

    α̂ is the running acceptance rate, accepted / tested drafts so far, with one pseudo-success and one
    pseudo-failure (so the first round starts at ½, or at the draft's measured acceptance when it is
    known); c is measured online like ``cost-aware``'s (0 until the second round: the first also runs the
    prompt). Each round records α̂, c, the continuous optimum, the chosen γ, the objective there and the
    ascent's path."""

    uses_evidence = False

    def __init__(self, gamma: int, verify_curve: tuple[float, ...] | None = None):
        self.cap = gamma
        self.priced = verify_curve is not None
        self.costs = StepCosts(gamma, verify_curve if verify_curve is not None else (1.0,) * (gamma + 1))
        self.kind = "dynamic-gamma-priced" if self.priced else "dynamic-gamma"
        self.accepted = self.tested = 0
        self.prior_alpha: float | None = None  # the draft's acceptance measured offline, if known
        self.optimum = float(gamma)  # the last continuous optimum: where the next ascent starts
        self.decision: dict[str, Any] = {}

    @property
    def alpha(self) -> float:
        prior = 0.5 if self.prior_alpha is None else self.prior_alpha
        return (self.accepted + 2 * prior) / (self.tested + 2)

    @property
    def verify_ratio(self) -> list[float] | None:
        """T(n)/T(1) for n = 1…γ cap + 1 when priced."""
        return self.costs.ratio[: self.cap + 1] if self.priced else None

    def draft_length(self, evidence=None) -> int:
        alpha, c, ratio = self.alpha, self.costs.c, self.verify_ratio
        path = theory.gamma_by_ascent(alpha, c, 1.0, float(self.cap), self.optimum, ratio)
        self.optimum = path[-1]
        gamma = theory.best_whole_gamma(alpha, c, self.optimum, 1, self.cap, ratio)
        self.decision = {"alpha_hat": alpha, "c": c, "gamma_continuous": self.optimum, "gamma": gamma,
                         "objective": float(theory.speedup_curve(alpha, c, gamma, ratio)), "ascent": path}
        return gamma

    def update(self, drafted, accepted, timing=None, draft_forwards=0) -> dict[str, Any]:
        self.accepted += accepted
        self.tested += accepted + (1 if accepted < drafted else 0)  # nothing after a rejection is tested
        self.costs.observe(drafted, timing, draft_forwards)
        record = {"kind": self.kind, "priced": self.priced, **self.decision, "alpha_after": self.alpha}
        return record if not self.priced else {**record, "verify_ratio": self.verify_ratio}


def _ema(old: float | None, new: float, weight: float = StepCosts.EMA) -> float:
    return new if old is None else (1 - weight) * old + weight * new
