"""Closed forms from the papers (numpy only; no torch).

Leviathan et al. 2023 ("Fast Inference from Transformers via Speculative Decoding", section 3):
    expected tokens per round        E[tokens] = (1 − α^(γ+1)) / (1 − α)
    wall-time improvement (Thm 3.8)  (1 − α^(γ+1)) / ((1 − α)(γc + 1))
    arithmetic operations (Thm 3.11) (1 − α)(γĉ + γ + 1) / (1 − α^(γ+1))
    optimal γ                        argmax over integers of Thm 3.8

EESD Appendix D: v_d, r_d, their harmonic mean HM and the speedup of eq. 14.
"""

from __future__ import annotations

import numpy as np


def expected_tokens(alpha, gamma):
    """Expected tokens emitted per round with γ drafts accepted i.i.d. with probability α (eq. 1)."""
    alpha = np.asarray(alpha, dtype=float)
    gamma = np.asarray(gamma, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (1 - alpha ** (gamma + 1)) / (1 - alpha)
    return np.where(np.isclose(alpha, 1.0), gamma + 1, out)


def speedup(alpha, gamma, c):
    """Theorem 3.8: expected wall-time improvement over autoregressive decoding."""
    return expected_tokens(alpha, gamma) / (np.asarray(gamma, dtype=float) * np.asarray(c, dtype=float) + 1)


def operations_factor(alpha, gamma, c_hat):
    """Theorem 3.11: expected factor of total arithmetic operations (ĉ = draft/target ops per token)."""
    gamma = np.asarray(gamma, dtype=float)
    return (gamma * np.asarray(c_hat, dtype=float) + gamma + 1) / expected_tokens(alpha, gamma)


def optimal_gamma(alpha, c, max_gamma: int = 32) -> int:
    """The integer γ in [1, max_gamma] that maximises Theorem 3.8 (the paper's Figure 3)."""
    gammas = np.arange(1, max_gamma + 1)
    return int(gammas[np.argmax(speedup(alpha, gammas, c))])


def speedup_with_verify_cost(alpha, gamma, c, verify_ratio):
    """Theorem 3.8 with verification priced as measured: E[tokens] / (γc + T(γ+1)/T(1)).

    Leviathan et al. price a verification of γ + 1 tokens like one target step (T(γ+1) = T(1)), true on
    an accelerator with spare parallelism; on a CPU it depends on the kernels (this project's 2-core
    machine: ≈ 1.6× one token for two through MKL, ≈ 1.0–1.1× on the packed fast path, 2.5× for 40
    positions), so ``verify_ratio`` = T(γ+1)/T(1) enters the denominator.
    """
    gamma = np.asarray(gamma, dtype=float)
    return expected_tokens(alpha, gamma) / (gamma * np.asarray(c, dtype=float) + np.asarray(verify_ratio, dtype=float))


def eesd_speedup(v_d, r_d, c):
    """EESD eq. 14: speedup = v_d / ((c − v_d)·r_d + v_d), from the time model of eq. 13
    T = (r_d·L / v_d)·T_d + (1 − r_d)·L·T_t, with c = T_d / T_t (the paper calls it α)."""
    v_d, r_d, c = (np.asarray(x, dtype=float) for x in (v_d, r_d, c))
    with np.errstate(divide="ignore", invalid="ignore"):
        return v_d / ((c - v_d) * r_d + v_d)


def harmonic_mean(v_d, r_d) -> float:
    """EESD Appendix D's HM of v_d (eq. 11) and r_d (eq. 12); 0 when both are 0."""
    return 2 * v_d * r_d / (v_d + r_d) if v_d + r_d > 0 else 0.0
