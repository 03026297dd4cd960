"""EESD's Thompson-sampling draft-length controllers (Liu et al., section 3.3 and Appendix B).

At every draft step the controller samples θ from its posterior and a Bernoulli χ ~ P_B(θ): χ = 1 drafts
one more token, χ = 0 stops the draft (Algorithm 1, steps 8–12). Two posteriors:

* ``beta-ts`` (Algorithm 2): θ ~ Beta(α, β) (eq. 2), updated after each verification with
  α ← α + r, β ← β + (n − r), r = |Q_v| − 1, n = min(|Q_v| + 1, |Q_d|) (eq. 3–4).
* ``cali-ts`` (Algorithm 3): θ ~ N(μ, σ²) with μ = w·θ_M + (1 − w)·θ̂, w = σ_S² / (nσ_M² + σ_S²)
  (eq. 6, 9), 1/σ² = 1/σ_M² + n/σ_S² (eq. 7); θ_M is a trained predictor's score (eq. 5) and θ̂ the
  running mean of χ (eq. 10). Early on μ follows the model, later the observed rate.

The views, in page order (names sort so): ``ts-posterior``, ``ts-round-decisions``, ``ts-theta-calibration``
(cali-ts only). They read each round's ``controller`` dict only (see ``RoundTrace``):
``beta-ts``: alpha_before, beta_before, alpha_after, beta_after, theta, continue, r, n;
``cali-ts``: theta_model, mu, sigma, theta, continue, theta_hat, theta_hat_after, n.
A round that drafted nothing has empty per-step lists.
"""

from __future__ import annotations

from .. import MethodView, register
from .figures import MAX_THETA_MARKS, calibration_figure, decisions_figure, posterior_figure
from .posteriors import (BINS, GRID, KINDS, beta_density, gaussian_density, is_cali, is_ts, outside_mass,
                         round_posterior, step_fates, ts_kind)

__all__ = ["BINS", "GRID", "KINDS", "MAX_THETA_MARKS", "beta_density", "calibration_figure", "decisions_figure",
           "gaussian_density", "outside_mass", "posterior_figure", "round_posterior", "step_fates", "ts_kind"]

register(MethodView(
    name="ts-posterior", title="TS posterior", applies=is_ts, render=posterior_figure,
    description="The Thompson-sampling posterior of θ round by round, with the draft lengths it produced "
                "(EESD eq. 2–4, 6–9)."))
register(MethodView(
    name="ts-round-decisions", title="TS decisions", applies=is_ts, render=decisions_figure,
    description="The selected round's sampled θ, continue/stop decision and token fate per draft step "
                "(EESD Algorithm 1)."))
register(MethodView(
    name="ts-theta-calibration", title="Calibration", applies=is_cali, render=calibration_figure,
    description="Calibrated TS: μ between the model's θ_M and the observed θ̂, and σ, over rounds "
                "(EESD eq. 6–10)."))
