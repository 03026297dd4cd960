"""Dynamic γ (the reproduction report's "varying γ"): the ascent finds Theorem 3.8's optimum, the
controller follows the run's α̂ and c, the method stays lossless, and its view draws every round."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import PREFIX, chi_square_pvalue, exact_two_token_distribution

import explorer
from explorer import theory, viz
from explorer.engine.controllers import DynamicGamma, make_controller
from explorer.engine.sampling import SamplingConfig
from explorer.trace import Timing
from explorer.viz.views.dynamic import dynamic_figure

# T(n)/T(1) for n = 1…17 with a CPU-like rise (flat to 5, then 10 % per token)
RATIO = np.array([1, 1.02, 1.05, 1.08, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.1, 2.2, 2.3])


@pytest.mark.parametrize("ratio", [None, RATIO], ids=["one-step verify", "priced verify"])
def test_the_ascent_reaches_the_best_whole_gamma_from_anywhere(ratio):
    """Over α ∈ [0, 0.99], c ∈ [0, 1] and starts across [1, 16]: the length chosen is the integer argmax
    of Theorem 3.8 (priced: of E / (γc + T(γ+1)/T(1))), found by brute force."""
    ks = np.arange(1, 17)
    for alpha in np.linspace(0, 0.99, 23):
        for c in (0.0, 0.01, 0.1, 0.3, 1.0):
            values = theory.speedup(alpha, ks, c) if ratio is None else \
                theory.speedup_with_verify_cost(alpha, ks, c, ratio[ks])
            for start in (1.0, 4.0, 9.5, 16.0):
                path = theory.gamma_by_ascent(alpha, c, 1, 16, start, ratio)
                gamma = theory.best_whole_gamma(alpha, c, path[-1], 1, 16, ratio)
                assert values[gamma - 1] >= values.max() - 1e-12, (alpha, c, start, path[-1], gamma)
                assert len(path) <= 101 and all(1 <= g <= 16 for g in path)


def test_the_ascent_climbs():
    """Each step of the path improves the objective (a step that would not is not taken)."""
    path = theory.gamma_by_ascent(0.8, 0.05, 1, 32, 1.0)
    values = theory.speedup_curve(0.8, 0.05, np.array(path))
    assert len(path) > 3 and np.all(np.diff(values) >= 0) and abs(path[-1] - 9.0) < 3


def outcome(ctrl, drafted, accepted, verify_s=0.05, draft_s=0.0):
    ctrl.draft_length()
    return ctrl.update(drafted, accepted, Timing(draft_s, verify_s, 0.0), drafted)


def test_the_controller_follows_alpha_and_c():
    ctrl = DynamicGamma(12)
    first = outcome(ctrl, 12, 12)  # α̂ starts at ½ and c at 0 (unknown): the cap
    assert first["alpha_hat"] == 0.5 and first["gamma"] == 12 and first["kind"] == "dynamic-gamma"
    for _ in range(2):  # every draft accepted, drafting almost free: stay at the cap
        record = outcome(ctrl, 12, 12, draft_s=12 * 0.001)
    assert record["gamma"] == 12 and record["alpha_hat"] > 0.9
    for _ in range(60):  # now every first draft is refused and a draft step costs half a target step
        record = outcome(ctrl, record["gamma"], 0, draft_s=0.025 * record["gamma"])
    assert record["gamma"] == 1 and record["alpha_hat"] < 0.4 and record["c"] > 0.3
    assert record["objective"] == pytest.approx(float(theory.speedup(record["alpha_hat"], 1, record["c"])))
    assert record["ascent"][-1] == pytest.approx(record["gamma_continuous"])


def test_the_priced_variant_drafts_less_when_verification_costs_more():
    """Same α̂ and c: pricing a steeply rising T(γ+1)/T(1) chooses a shorter draft."""
    steep = tuple(1.0 + 0.3 * n for n in range(17))
    free, priced = DynamicGamma(16), make_controller("dynamic-gamma-priced", 16, steep)
    for ctrl in (free, priced):
        for _ in range(20):
            record = outcome(ctrl, 6, 5)  # α̂ ≈ 0.8, c = 0
    assert priced.kind == "dynamic-gamma-priced" and record["priced"] and len(record["verify_ratio"]) == 17
    assert priced.draft_length() < free.draft_length() == 16


@pytest.mark.parametrize("controller", ["dynamic-gamma", "dynamic-gamma-priced"])
def test_dynamic_gamma_is_lossless(default_model, controller, shipped_exit4_agreement):
    prompt = "Correct the spelling: Me and my freind goes to the libary every weeks."
    ar = explorer.decode(default_model, prompt, method="ar", max_new_tokens=24)
    for draft in ("prompt-lookup:3", "early-exit:4"):
        t = explorer.decode(default_model, prompt, draft=draft, controller=controller, gamma=8, max_new_tokens=24)
        assert t.output_ids == ar.output_ids
        assert all(r.controller["kind"] == controller and 1 <= r.controller["gamma"] <= 8 for r in t.rounds if r.drafted)
        assert explorer.load_trace(t.to_json()) == t
    # the shipped exit's held-out agreement is where α̂ starts
    assert t.rounds[0].controller["alpha_hat"] == pytest.approx(shipped_exit4_agreement, abs=1e-4)


def test_sampled_output_follows_the_target(tiny_target, tiny_draft):
    """Only γ changes between rounds, so the accept rule keeps the target's distribution: the two
    tokens' frequencies over 1500 seeds pass the same χ² test as speculative's (test_lossless)."""
    p0, p1 = exact_two_token_distribution(tiny_target, SamplingConfig(1.0))
    counts = np.zeros((2, p0.shape[0]))
    for seed in range(1500):
        t = explorer.decode(tiny_target, prompt_ids=PREFIX, draft=tiny_draft, controller="dynamic-gamma", gamma=3,
                            max_new_tokens=2, temperature=1.0, seed=seed)
        counts[0, t.output_ids[0]] += 1
        counts[1, t.output_ids[1]] += 1
    assert chi_square_pvalue(counts[0], p0) > 1e-3 and chi_square_pvalue(counts[1], p1) > 1e-3


def test_the_view_draws_each_round_and_survives_a_round_without_a_decision(default_model):
    t = explorer.decode(default_model, "Repeat: one two three, one two three, one two three.", draft="prompt-lookup:3",
                        controller="dynamic-gamma-priced", gamma=6, max_new_tokens=24)
    assert "dynamic-gamma" in {v.name for v in viz.views_for(t)}
    for i in range(len(t.rounds)):
        fig = dynamic_figure(t, i)
        names = {trace.name for trace in fig.data}
        assert {"γ chosen", "α̂ (right axis)", "objective f(γ)", "maximum", "γ drafted"} <= names
    plain = explorer.decode(default_model, "Hi", draft="prompt-lookup:3", max_new_tokens=4)
    assert "dynamic-gamma" not in {v.name for v in viz.views_for(plain)}
