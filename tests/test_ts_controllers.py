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
    from explorer.engine.trace import RoundTrace, Timing

    rounds = tuple(RoundTrace(index=i, context_len=3 + i, drafted=(5, 6), q_drafted=(0.5, 0.5), p_drafted=(0.1, 0.1),
                              n_accepted=0, emitted=(7,), emitted_kind=("corrected",), p_emitted=(0.9,), event="rejected",
                              timing=Timing(0.02, 0.1, 0.0), draft_forwards=2) for i in range(3))
    s = summarize(rounds, 0.0, "max_new_tokens")
    assert s.v_d == 0 and s.r_d == 0 and s.hm == 0
    c = s.c_measured  # 0.02 s for 2 draft forwards over 0.1 s per target forward
    assert c == pytest.approx(0.1) and s.eq14_speedup == pytest.approx(1 / (1 + c * 6 / 3))
