"""Draft-length controllers: how many tokens to draft in the next round.

A controller answers ``draft_length(evidence)`` before a round (``evidence``: what the drafter says its
next draft rests on, or None; see ``drafters``; given only to a controller with ``uses_evidence``), may
stop a draft early through ``keep_drafting(step, q_row)`` (the seam for EESD's Thompson-sampling stop
rule), and learns from the round's outcome in ``update``, which returns the state record that goes into
the round's trace.
``update`` also receives the round's timing, for controllers that price drafting (``cost-aware``).
"""

from __future__ import annotations

import math
import random
from typing import Any, Protocol

import torch

from .. import theory
from ..errors import ExplorerError
from ..limits import MAX_GAMMA
from ..trace import Timing


DEFAULT_GAMMA = 4  # tokens drafted per round when a call names none (every entry point reads it here)
DEFAULT_CONTROLLER = "fixed"

class Controller(Protocol):
    kind: str

    def draft_length(self, evidence: str | None = None) -> int: ...

    def keep_drafting(self, step: int, q_row: torch.Tensor | None) -> bool: ...

    def update(self, drafted: int, accepted: int, timing: Timing | None = None,
               draft_forwards: int = 0) -> dict[str, Any]: ...


class Fixed:
    """Always γ drafts (Leviathan et al., Algorithm 1)."""

    kind = "fixed"

    def __init__(self, gamma: int):
        self.gamma = gamma

    def draft_length(self, evidence=None) -> int:
        return self.gamma

    def keep_drafting(self, step: int, q_row: torch.Tensor | None) -> bool:
        return True

    def update(self, drafted, accepted, timing=None, draft_forwards=0) -> dict[str, Any]:
        return {"kind": self.kind, "gamma": self.gamma}


class Heuristic:
    """The Hugging Face assisted-generation schedule: +2 after a fully accepted round, −1 otherwise
    (never below 1), starting from γ."""

    kind = "heuristic"

    def __init__(self, gamma: int):
        self.gamma = gamma

    def draft_length(self, evidence=None) -> int:
        return self.gamma

    def keep_drafting(self, step: int, q_row: torch.Tensor | None) -> bool:
        return True

    def update(self, drafted, accepted, timing=None, draft_forwards=0) -> dict[str, Any]:
        before = self.gamma
        if drafted > 0:
            grown = self.gamma + 2 if accepted == drafted else self.gamma - 1
            self.gamma = min(MAX_GAMMA, max(1, grown))
        return {"kind": self.kind, "gamma_before": before, "gamma_after": self.gamma}


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


class CostAware:
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

    def keep_drafting(self, step: int, q_row: torch.Tensor | None) -> bool:
        return True

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


class BetaTS:
    """Thompson-sampling stop rule with a Beta posterior (EESD Algorithm 1/2, eq. 2–4).

    After each drafted token, θ ~ Beta(α, β) and χ ~ Bernoulli(θ); χ = 0 stops the draft (γ is only a
    cap). After verification, with Q_v the tokens the round adds to the output (the accepted drafts and
    the target's own token, as ``t ← t + |Q_v|`` counts them) and Q_d the drafted tokens:
    r = |Q_v| − 1 (accepted drafts), n = min(|Q_v| + 1, |Q_d|), α += r (eq. 3), β += n − r (eq. 4).

    Priced (``beta-ts-priced``, given ``costs``): the sampled θ decides through the measured prices
    instead of the Bernoulli — with i tokens drafted, drafting goes on iff, were every later token
    accepted with probability θ, some length k > i beats stopping at i in expected tokens per unit of
    time at the measured c and T(k + 1)/T(1) (``StepCosts``). Thompson sampling proper: draw the
    parameter from the posterior, then act optimally for it. Before a round, one more draw decides
    whether to draft at all (k = 0, a plain target step, when not even one token pays); the posterior
    updates are the paper's.
    """

    kind = "beta-ts"

    def __init__(self, gamma: int, seed: int = 0, prior: tuple[float, float] = (1.0, 1.0),
                 costs: StepCosts | None = None):
        self.gamma = gamma
        self.alpha, self.beta = prior
        self.random = random.Random(seed)
        self.costs = costs
        self.thetas: list[float] = []
        self.decisions: list[bool] = []
        self.opening: float | None = None  # priced: the θ drawn before the round

    def draft_length(self, evidence=None) -> int:
        if self.costs is None:
            return self.gamma
        self.opening = self.opening_theta()
        return self.gamma if self.costs.best_length(self.opening) > 0 else 0

    def opening_theta(self) -> float:
        """θ drawn before a round (priced rules), from the posterior with no draft step's evidence."""
        return self.random.betavariate(self.alpha, self.beta)

    def sample_theta(self, step: int, q_row: torch.Tensor | None) -> float:
        return self.random.betavariate(self.alpha, self.beta)

    def keep_drafting(self, step: int, q_row: torch.Tensor | None) -> bool:
        theta = self.sample_theta(step, q_row)
        if self.costs is None:
            go_on = self.random.random() < theta  # χ ~ Bernoulli(θ)
        else:  # step + 1 tokens drafted: go on iff a longer draft pays at θ
            go_on = self.costs.best_length(theta, start=step + 1) > step + 1
        self.thetas.append(theta)
        self.decisions.append(go_on)
        return go_on

    def priced_record(self, drafted: int, timing, draft_forwards: int) -> dict[str, Any]:
        """The priced rule's part of the round record (empty for the paper's rule); learns the costs."""
        if self.costs is None:
            return {}
        record = {"priced": True, "c": self.costs.c, "opening_theta": self.opening,
                  "verify_ratio": self.costs.ratio[: self.gamma + 1]}
        self.costs.observe(drafted, timing, draft_forwards)
        self.opening = None
        return record

    def update(self, drafted, accepted, timing=None, draft_forwards=0) -> dict[str, Any]:
        record = {"kind": self.kind, "alpha_before": self.alpha, "beta_before": self.beta,
                  "theta": self.thetas, "continue": self.decisions,
                  **self.priced_record(drafted, timing, draft_forwards)}
        r = n = 0
        if drafted:
            q_v = accepted + 1
            r, n = q_v - 1, min(q_v + 1, drafted)
            self.alpha += r
            self.beta += n - r
        self.thetas, self.decisions = [], []
        return {**record, "alpha_after": self.alpha, "beta_after": self.beta, "r": r, "n": n}


class CaliTS(BetaTS):
    """Thompson sampling with calibration (EESD Algorithm 3, eq. 5–10): θ ~ N(μ, σ²) with

        μ  = σ_S² / (nσ_M² + σ_S²) · θ_M + nσ_M² / (nσ_M² + σ_S²) · θ̂        (eq. 6)
        σ² = σ_M² σ_S² / (σ_S² + nσ_M²)                                         (eq. 7, 9)

    θ_M is the trained predictor's score for the current draft step (eq. 5; ``theta_model(step, q_row)``,
    a constant θ̂₀ for drafters that have none), n the verifications so far, θ̂ the running sample mean
    (eq. 10) θ̂ ← (θ̂ · (t_prev + 1) + r) / (t + 1), t the output length, r = |Q_v| − 1 as in Beta-TS.
    The literal numerator |Q_v| would count the target's own token as a success and drive θ̂ to 1 for
    any draft; r keeps θ̂ the fraction of output tokens that came from accepted drafts.

    Priced (``cali-ts-priced``): as for ``beta-ts-priced``; the draw before a round uses θ̂ in place of θ_M
    (no draft state exists yet).
    """

    kind = "cali-ts"

    def __init__(self, gamma: int, seed: int = 0, theta_model=None, sigma_m: float = 0.2, sigma_s: float = 0.5,
                 theta_0: float = 0.5, costs: StepCosts | None = None):
        super().__init__(gamma, seed, costs=costs)
        self.theta_model = theta_model
        self.sigma_m, self.sigma_s = sigma_m, sigma_s
        self.theta_0 = self.theta_hat = theta_0
        self.n = 0
        self.t = 0
        self.steps: dict[str, list[float]] = {"theta_model": [], "mu": [], "sigma": []}

    def posterior(self, theta_m: float) -> tuple[float, float]:
        """(μ, σ) of eq. 6–7 for the predictor's θ_M."""
        sm2, ss2 = self.sigma_m ** 2, self.sigma_s ** 2
        mu = ss2 / (self.n * sm2 + ss2) * theta_m + self.n * sm2 / (self.n * sm2 + ss2) * self.theta_hat
        return mu, math.sqrt(sm2 * ss2 / (ss2 + self.n * sm2))

    def opening_theta(self) -> float:
        mu, sigma = self.posterior(self.theta_hat)
        return min(1.0, max(0.0, self.random.gauss(mu, sigma)))

    def sample_theta(self, step: int, q_row: torch.Tensor | None) -> float:
        theta_m = self.theta_model(step, q_row) if self.theta_model is not None else None
        theta_m = self.theta_0 if theta_m is None else float(theta_m)  # no predictor or no state yet: θ̂₀
        mu, sigma = self.posterior(theta_m)
        for name, value in (("theta_model", theta_m), ("mu", mu), ("sigma", sigma)):
            self.steps[name].append(value)
        return min(1.0, max(0.0, self.random.gauss(mu, sigma)))  # a probability for χ's Bernoulli

    def update(self, drafted, accepted, timing=None, draft_forwards=0) -> dict[str, Any]:
        record = {"kind": self.kind, "theta": self.thetas, "continue": self.decisions, **self.steps,
                  "theta_hat": self.theta_hat, "n": self.n, **self.priced_record(drafted, timing, draft_forwards)}
        if drafted:
            t_prev, self.t = self.t, self.t + accepted + 1
            self.theta_hat = (self.theta_hat * (t_prev + 1) + accepted) / (self.t + 1)
            self.n += 1
        self.thetas, self.decisions = [], []
        self.steps = {"theta_model": [], "mu": [], "sigma": []}
        return {**record, "theta_hat_after": self.theta_hat}


class DynamicGamma:
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

    def keep_drafting(self, step: int, q_row: torch.Tensor | None) -> bool:
        return True

    def update(self, drafted, accepted, timing=None, draft_forwards=0) -> dict[str, Any]:
        self.accepted += accepted
        self.tested += accepted + (1 if accepted < drafted else 0)  # nothing after a rejection is tested
        self.costs.observe(drafted, timing, draft_forwards)
        record = {"kind": self.kind, "priced": self.priced, **self.decision, "alpha_after": self.alpha}
        return record if not self.priced else {**record, "verify_ratio": self.verify_ratio}


def _ema(old: float | None, new: float, weight: float = StepCosts.EMA) -> float:
    return new if old is None else (1 - weight) * old + weight * new


CONTROLLERS = {"fixed": Fixed, "heuristic": Heuristic, "cost-aware": CostAware, "beta-ts": BetaTS, "cali-ts": CaliTS,
               "beta-ts-priced": BetaTS, "cali-ts-priced": CaliTS, "dynamic-gamma": DynamicGamma,
               "dynamic-gamma-priced": DynamicGamma}
PRICED = ("cost-aware", "beta-ts-priced", "cali-ts-priced", "dynamic-gamma-priced")  # the controllers that need the verify-cost curve


def make_controller(name: str, gamma: int, verify_curve=None, seed: int = 0, drafter=None) -> Controller:
    """A controller by name; ``verify_curve`` (seconds per forward of 1, 2, … tokens, or a function that
    measures it) for the priced ones; ``seed`` for the Thompson samplers' draws. ``drafter`` (a
    ``drafters.Drafter``) gives what a controller may learn from the draft: cali-ts its trained θ_M
    predictor (EESD eq. 5), cost-aware the acceptance measured offline as its prior."""
    check_controller(name, gamma)
    curve = (verify_curve() if callable(verify_curve) else verify_curve) if name in PRICED else None
    if name == "cost-aware":
        controller = CostAware(gamma, curve)
        controller.prior_alpha = getattr(drafter, "expected_acceptance", None)
        return controller
    costs = StepCosts(gamma, curve) if curve is not None else None
    if name.startswith("beta-ts"):
        return BetaTS(gamma, seed, costs=costs)
    if name.startswith("cali-ts"):
        return CaliTS(gamma, seed, getattr(drafter, "theta_model", None), costs=costs)
    if name.startswith("dynamic-gamma"):
        controller = DynamicGamma(gamma, curve)
        controller.prior_alpha = getattr(drafter, "expected_acceptance", None)
        return controller
    return CONTROLLERS[name](gamma)


def check_controller(name: str, gamma: int) -> None:
    """``ExplorerError`` with one line unless ``name`` is a controller and γ a whole number in range."""
    if not isinstance(gamma, int) or isinstance(gamma, bool) or not 1 <= gamma <= MAX_GAMMA:
        raise ExplorerError(f"gamma must be a whole number from 1 to {MAX_GAMMA}, got {gamma!r}")
    if name not in CONTROLLERS:
        raise ExplorerError(f"unknown controller {name!r}: use one of {', '.join(CONTROLLERS)}")
