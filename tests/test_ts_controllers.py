"""EESD's Thompson-sampling stop rules: posterior updates follow eq. 3–4 (Beta) and eq. 6–7, 10
(calibrated Gaussian) on hand-built acceptance sequences; draws are seeded; decisions shorten drafts."""

import math

import pytest

from explorer.engine.controllers import BetaTS, CaliTS, make_controller


def test_beta_posterior_follows_eq_3_and_4():
    ts = BetaTS(gamma=8)
    # (drafted, accepted) -> |Q_v| = accepted + 1, r = |Q_v| − 1, n = min(|Q_v| + 1, |Q_d|)
    expected = [((4, 4), (4, 4)), ((4, 1), (1, 3)), ((3, 2), (2, 3)), ((5, 0), (0, 2)), ((0, 0), (0, 0))]
    alpha, beta = 1.0, 1.0
    for (drafted, accepted), (r, n) in expected:
        rec = ts.update(drafted, accepted)
        assert (rec["r"], rec["n"]) == (r, n)
        assert (rec["alpha_before"], rec["beta_before"]) == (alpha, beta)
        alpha, beta = alpha + r, beta + (n - r)
        assert (rec["alpha_after"], rec["beta_after"]) == (ts.alpha, ts.beta) == (alpha, beta)


def test_beta_draws_are_recorded_per_step_and_seeded():
    a, b = BetaTS(8, seed=3), BetaTS(8, seed=3)
    steps_a = [a.keep_drafting(i, None) for i in range(6)]
    steps_b = [b.keep_drafting(i, None) for i in range(6)]
    assert steps_a == steps_b and a.thetas == b.thetas
    rec = a.update(6, 2)
    assert rec["continue"] == steps_a and len(rec["theta"]) == 6 and all(0 <= t <= 1 for t in rec["theta"])
    assert a.thetas == [] and a.decisions == []  # the next round starts a fresh record


def test_a_confident_posterior_keeps_drafting_and_a_doubtful_one_stops():
    sure, doubtful = BetaTS(8, seed=0, prior=(50.0, 1.0)), BetaTS(8, seed=0, prior=(1.0, 50.0))
    assert sum(sure.keep_drafting(i, None) for i in range(200)) > 180
    assert sum(doubtful.keep_drafting(i, None) for i in range(200)) < 20


def test_cali_mu_and_sigma_follow_eq_6_and_7():
    ts = CaliTS(gamma=8, theta_model=lambda step, q: 0.9, sigma_m=0.2, sigma_s=0.5, theta_0=0.5)
    ts.keep_drafting(0, None)  # n = 0: μ is the model's θ_M, σ is σ_M
    assert ts.steps["mu"][0] == pytest.approx(0.9) and ts.steps["sigma"][0] == pytest.approx(0.2)
    rec = ts.update(1, 0)
    # eq. 10: θ̂ = (θ̂ (t_prev + 1) + r) / (t + 1) with t_prev = 0, t = 1, r = 0
    assert rec["theta_hat"] == 0.5 and rec["theta_hat_after"] == pytest.approx(0.5 / 2) and rec["n"] == 0
    ts.update(4, 4)  # t = 6, r = 4
    assert ts.theta_hat == pytest.approx((0.25 * 2 + 4) / 7)
    ts.keep_drafting(0, None)
    n, sm2, ss2 = 2, 0.04, 0.25
    mu = ss2 / (n * sm2 + ss2) * 0.9 + n * sm2 / (n * sm2 + ss2) * ts.theta_hat
    assert ts.steps["mu"][0] == pytest.approx(mu)
    assert ts.steps["sigma"][0] == pytest.approx(math.sqrt(sm2 * ss2 / (ss2 + n * sm2)))
    assert ts.steps["theta_model"] == [0.9]


def test_cali_without_a_predictor_uses_its_prior_and_makes_by_name():
    ts = make_controller("cali-ts", 6, seed=1)
    ts.keep_drafting(0, None)
    assert ts.steps["theta_model"] == [0.5]
    assert make_controller("beta-ts", 6).kind == "beta-ts"


def test_eq14_summary_is_finite_when_nothing_is_accepted():
    from explorer.api import summarize
    from explorer.trace import RoundTrace, Timing

    rounds = tuple(RoundTrace(index=i, context_len=3 + i, drafted=(5, 6), q_drafted=(0.5, 0.5), p_drafted=(0.1, 0.1),
                              n_accepted=0, emitted=(7,), emitted_kind=("corrected",), p_emitted=(0.9,), event="rejected",
                              timing=Timing(0.02, 0.1, 0.0), draft_forwards=2) for i in range(3))
    s = summarize(rounds, 0.0, "max_new_tokens")
    assert s.v_d == 0 and s.r_d == 0 and s.hm == 0
    c = s.c_measured  # 0.02 s for 2 draft forwards over 0.1 s per target forward
    assert c == pytest.approx(0.1) and s.eq14_speedup == pytest.approx(1 / (1 + c * 6 / 3))


# -- the priced variants (beta-ts-priced, cali-ts-priced): the sampled θ decides through the measured costs

def _priced(name, curve, c=0.0, gamma=6, seed=0):
    ctrl = make_controller(name, gamma, curve, seed=seed)
    if c:  # as if one round had been timed: a target step of 1 s and a draft step of c s
        ctrl.costs.target_step_s, ctrl.costs.draft_step_s = 1.0, c
    return ctrl


def test_priced_ts_drafts_nothing_when_verifying_two_tokens_costs_two_steps():
    """At T(2)/T(1) = 2 no θ < 1 makes a draft pay: (1 + θ) / 2 < 1."""
    for name in ("beta-ts-priced", "cali-ts-priced"):
        ctrl = _priced(name, (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0))
        assert all(ctrl.draft_length() == 0 for _ in range(50))
        assert ctrl.update(0, 0)["priced"] is True


def test_priced_ts_drafts_to_the_cap_when_drafting_is_free_and_verification_flat():
    """c = 0 and T(k)/T(1) = 1: every extra token is free, so any θ > 0 keeps drafting (a paper's GPU)."""
    ctrl = _priced("beta-ts-priced", (1.0,) * 7)
    assert ctrl.draft_length() == 6
    assert all(ctrl.keep_drafting(i, None) for i in range(5))


def test_priced_ts_stops_where_the_next_token_does_not_pay():
    """c = 0.3, T(k+1)/T(1) = 1 + 0.05k: with a confident posterior (θ ≈ 0.98) drafting goes on, with a
    doubtful one (θ ≈ 0.02) the first drafted token is the last; the paper's rule would go on ~2 % of the
    time anyway, the priced one never: its stop is a decision, not a coin."""
    curve = tuple(1.0 + 0.05 * k for k in range(7))
    sure = BetaTS(6, seed=0, prior=(50.0, 1.0), costs=_priced("beta-ts-priced", curve, c=0.3).costs)
    doubtful = BetaTS(6, seed=0, prior=(1.0, 50.0), costs=_priced("beta-ts-priced", curve, c=0.3).costs)
    assert sum(sure.keep_drafting(0, None) for _ in range(100)) > 95
    assert sum(doubtful.keep_drafting(0, None) for _ in range(100)) == 0
    assert sum(doubtful.draft_length() > 0 for _ in range(100)) == 0


def test_priced_ts_learns_c_from_the_rounds_and_records_it():
    from explorer.trace import Timing

    ctrl = make_controller("beta-ts-priced", 4, (0.1, 0.11, 0.12, 0.13, 0.14), seed=1)
    ctrl.draft_length()
    first = ctrl.update(2, 1, Timing(draft_s=0.04, verify_s=0.12, other_s=0.0), draft_forwards=2)
    assert first["c"] == 0.0  # nothing measured before the first round (which also runs the prompt)
    ctrl.update(2, 1, Timing(draft_s=0.04, verify_s=0.12, other_s=0.0), draft_forwards=2)
    rec = ctrl.update(0, 0)
    assert rec["c"] == pytest.approx(0.02 / (0.12 / 1.2))  # a draft step over a one-token target step
    assert rec["verify_ratio"] == pytest.approx([1.0, 1.1, 1.2, 1.3, 1.4])
