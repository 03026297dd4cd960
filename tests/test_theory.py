"""Leviathan et al.'s closed forms at points where their value is known."""

import numpy as np
import pytest

from explorer import theory


def test_expected_tokens_limits():
    assert theory.expected_tokens(0.0, 5) == pytest.approx(1.0)
    assert theory.expected_tokens(1.0, 5) == pytest.approx(6.0)
    assert theory.expected_tokens(0.5, 2) == pytest.approx(1.75)


def test_speedup_theorem_3_8():
    # γ = 1: (1 + α) / (1 + c), the paper's lower bound when α > c
    assert theory.speedup(0.8, 1, 0.1) == pytest.approx(1.8 / 1.1)
    assert theory.speedup(0.0, 4, 0.0) == pytest.approx(1.0)
    assert theory.speedup(0.6, 3, 0.0) == pytest.approx((1 - 0.6 ** 4) / 0.4)


def test_an_improvement_exists_iff_alpha_exceeds_c():
    gammas = np.arange(1, 30)
    assert theory.speedup(0.5, gammas, 0.4).max() > 1
    assert theory.speedup(0.3, gammas, 0.4).max() < 1


def test_the_share_of_the_draft_alone_is_theorem_3_8_times_c():
    # always right, verification like one step: γ + 1 tokens per γ steps and one target step, against one token a step
    assert theory.share_of_the_draft_alone(1.0, 4, 0.2, 1.0) == pytest.approx(5 * 0.2 / (4 * 0.2 + 1))
    assert theory.share_of_the_draft_alone(0.7, 3, 0.1, 1.0) == pytest.approx(0.1 * theory.speedup(0.7, 3, 0.1))
    # a free verification keeps all of an always-right draft's speed, and a dearer one keeps less
    assert theory.share_of_the_draft_alone(1.0, 8, 0.2, 0.0) == pytest.approx(9 / 8)
    assert theory.share_of_the_draft_alone(1.0, 8, 0.2, 2.0) < theory.share_of_the_draft_alone(1.0, 8, 0.2, 1.0)


def test_operations_factor_theorem_3_11():
    assert theory.operations_factor(0.0, 3, 0.1) == pytest.approx(3 * 0.1 + 3 + 1)
    assert theory.operations_factor(1.0, 3, 0.0) == pytest.approx(1.0)


def test_optimal_gamma_grows_with_alpha():
    values = [theory.optimal_gamma(a, 0.05) for a in (0.5, 0.7, 0.9)]
    assert values == sorted(values) and values[0] < values[-1]
