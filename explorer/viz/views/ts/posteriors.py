"""What the Thompson-sampling views read: which controller a trace's rounds carry, the fate of each drafted
token, and the posterior each round drew θ from (EESD eq. 2 for ``beta-ts``, eq. 6–9 for ``cali-ts``) as a
density on a grid of θ. Plain functions of the trace and numpy: no figure here (``figures`` draws them)."""

from __future__ import annotations

import math

import numpy as np

KINDS = ("beta-ts", "cali-ts")
BINS = 100
GRID = (np.arange(BINS) + 0.5) / BINS  # θ at the centres of BINS equal bins of [0, 1]


# -- reading the trace -------------------------------------------------------------------------------


def ts_kind(trace) -> str | None:
    """``beta-ts`` / ``cali-ts`` when the rounds (or, failing them, the settings) carry that controller."""
    for r in trace.rounds:
        kind = r.controller.get("kind")
        if kind in KINDS:
            return kind
    controller = getattr(trace.settings, "controller", None)
    return controller if controller in KINDS and trace.rounds else None


def is_ts(trace) -> bool:
    return ts_kind(trace) is not None


def is_cali(trace) -> bool:
    return ts_kind(trace) == "cali-ts"


def selected_round(trace, round_index: int) -> int:
    return max(0, min(int(round_index), len(trace.rounds) - 1))


def floats(values) -> list[float]:
    return [float(v) for v in (values or ())]


def first_value(values) -> float | None:
    values = floats(values)
    return values[0] if values else None


def step_fates(r) -> list[str]:
    """Fate of each drafted token: before n_accepted accepted; at n_accepted rejected when the round
    ended in a rejection (the accept test refused it); later ones discarded untested."""
    fates = []
    for i in range(len(r.drafted)):
        if i < r.n_accepted:
            fates.append("accepted")
        elif i == r.n_accepted and (r.event == "rejected" or r.rejected_at == i):
            fates.append("rejected")
        else:
            fates.append("discarded")
    return fates


# -- densities ---------------------------------------------------------------------------------------


def beta_density(alpha: float, beta: float, theta: np.ndarray = GRID) -> np.ndarray:
    """Beta(θ; α, β) = θ^(α−1) (1 − θ)^(β−1) / B(α, β) (eq. 2), in log space so large α, β stay finite.
    NaN everywhere for parameters that are not positive and finite."""
    a, b = float(alpha), float(beta)
    if not (math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0):
        return np.full(np.shape(theta), np.nan)
    log_b = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    return np.exp((a - 1) * np.log(theta) + (b - 1) * np.log1p(-theta) - log_b)


def gaussian_density(mu: float, sigma: float, theta: np.ndarray = GRID) -> np.ndarray:
    """N(θ; μ, σ²), the calibrated posterior θ is drawn from (Algorithm 3, step 11; eq. 9). Shown on
    [0, 1] only and not renormalised: a draw below 0 (above 1) acts as θ = 0 (1) in the Bernoulli, see
    ``outside_mass``."""
    m, s = float(mu), float(sigma)
    if not (math.isfinite(m) and math.isfinite(s) and s > 0):
        return np.full(np.shape(theta), np.nan)
    return np.exp(-0.5 * ((theta - m) / s) ** 2) / (s * math.sqrt(2 * math.pi))


def outside_mass(mu: float, sigma: float) -> float:
    """P(θ < 0) + P(θ > 1) under N(μ, σ²): the share of draws clipped to a certain stop or continue."""
    if not (sigma > 0):
        return 0.0
    below = 0.5 * (1 + math.erf((0 - mu) / (sigma * math.sqrt(2))))
    above = 0.5 * (1 - math.erf((1 - mu) / (sigma * math.sqrt(2))))
    return below + above


def round_posterior(r, kind: str) -> tuple[np.ndarray, float, str] | None:
    """The posterior θ was sampled from at the start of round ``r``: (density on ``GRID``, its mean, a
    one-line description), or None when the round has none to show (a cali-ts round with no draft step,
    or a dict without the fields)."""
    c = r.controller
    if kind == "beta-ts":
        a, b = c.get("alpha_before"), c.get("beta_before")
        if a is None or b is None or not (a > 0 and b > 0):
            return None
        return beta_density(a, b), a / (a + b), f"Beta(α = {a:.2f}, β = {b:.2f})"
    mu, sigma = first_value(c.get("mu")), first_value(c.get("sigma"))
    if mu is None or sigma is None or not sigma > 0:
        return None
    clipped = outside_mass(mu, sigma)
    return (gaussian_density(mu, sigma), mu,
            f"N(μ = {mu:.3f}, σ = {sigma:.3f}) · {clipped:.0%} of draws outside [0, 1], clipped")
