"""EESD's Thompson-sampling stop rules (Liu et al., Algorithms 1–3): ``beta-ts`` (a Beta posterior, eq. 2–4)
and ``cali-ts`` (a Gaussian posterior calibrated by a trained predictor, eq. 5–10), each with a priced variant
that decides through the measured costs (``priced.StepCosts``). They stop a draft step by step
(``keep_drafting``), γ being only a cap.
"""

from __future__ import annotations

import math
import random
from typing import Any

import torch

from .priced import StepCosts


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
