"""Closed forms from the papers (numpy only; no torch).

Leviathan et al. 2023 ("Fast Inference from Transformers via Speculative Decoding", section 3):
    expected tokens per round        E[tokens] = (1 − α^(γ+1)) / (1 − α)
    wall-time improvement (Thm 3.8)  (1 − α^(γ+1)) / ((1 − α)(γc + 1))
    against the draft alone          Thm 3.8 × c, verification priced by T(γ+1)/T(1) (``share_of_the_draft_alone``)
    arithmetic operations (Thm 3.11) (1 − α)(γĉ + γ + 1) / (1 − α^(γ+1))
    optimal γ                        argmax over integers of Thm 3.8
    a draft chain (section 7)        Thm 3.8 at the draft's own c divided by its own Thm 3.8 (``chain_speedup``)

EESD Appendix D: v_d, r_d, their harmonic mean HM and the speedup of eq. 14.
"""

from __future__ import annotations

import math

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


def chain_speedup(alpha, gamma, c, inner_alpha, inner_gamma, inner_c):
    """Theorem 3.8 for a two-level draft chain (Leviathan et al. section 7; staged speculative decoding,
    Spector & Ré 2023): the draft, whose step costs c target steps, itself decodes speculatively with a smaller
    proposer (acceptance ``inner_alpha``, ``inner_gamma`` proposals per inner round, each costing ``inner_c``
    of the draft's steps), so a drafted token costs c / Thm 3.8(inner_alpha, inner_gamma, inner_c) target steps.

    Approximate as Thm 3.8 is (i.i.d. acceptance at each level, a verification priced as one step) and one
    step further: an inner round is cut where the draft has the γ tokens the target asked for."""
    return speedup(alpha, gamma, np.asarray(c, dtype=float) / speedup(inner_alpha, inner_gamma, inner_c))


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


def share_of_the_draft_alone(alpha, gamma, c, verify_ratio):
    """Lossless decoding's speed as a share of its draft decoding alone (lossy): Theorem 3.8 with verification
    priced as measured, times c, since the draft alone emits one token per step of c target steps:
    E[tokens] · c / (γc + T(γ+1)/T(1)). At α = 1 (a draft that is always right) it is
    (γ + 1)c / (γc + T(γ+1)/T(1)), the most any draft of this step's cost can keep of its own speed while the target
    checks every token."""
    return np.asarray(c, dtype=float) * speedup_with_verify_cost(alpha, gamma, c, verify_ratio)


def speedup_curve(alpha: float, c: float, gamma, verify_ratio=None):
    """Theorem 3.8 at a continuous γ (≥ 0), with verification priced by ``verify_ratio`` = T(n)/T(1) for
    n = 1, 2, … (interpolated between whole n) or, when None, by one step as in the paper."""
    gamma = np.asarray(gamma, dtype=float)
    verify = 1.0 if verify_ratio is None else np.interp(gamma + 1, np.arange(1, len(verify_ratio) + 1), verify_ratio)
    return expected_tokens(alpha, gamma) / (gamma * c + verify)


def gamma_by_ascent(alpha: float, c: float, lowest: float, highest: float, start: float, verify_ratio=None,
                    steps: int = 100, tolerance: float = 1e-3) -> list[float]:
    """The reproduction report's "varying γ": gradient ascent on a continuous γ of Theorem 3.8's
    improvement f(γ) = E(γ) / D(γ), E = (1 − α^(γ+1)) / (1 − α), D = γc + T(γ+1)/T(1) (T(γ+1)/T(1) = 1 unless
    ``verify_ratio`` prices it): f'(γ) = (E'·D − E·D') / D², E' = −α^(γ+1)·ln α / (1 − α) (1 at α = 1, 0 at
    α = 0), D' = c + the slope of the interpolated verify cost.

    The step follows the sign of f' with an adaptive length (Rprop): it grows 1.5× while f improves and
    halves, without moving, when it would not. A fixed learning rate crawls where f is flat (f' ≈ 1e-4
    far from the peak at small c) and overshoots a narrow peak; this reaches the optimum within
    ``tolerance`` from anywhere in [lowest, highest] in a few dozen steps. Returns every γ visited from
    ``start`` (the last is the optimum; ``best_whole_gamma`` turns it into a draft length)."""
    alpha = min(max(float(alpha), 0.0), 1.0)
    ns = np.arange(1, len(verify_ratio) + 1) if verify_ratio is not None else None

    def slope(g: float) -> float:
        if alpha >= 1.0:
            e, de = g + 1, 1.0
        elif alpha <= 0.0:
            e, de = 1.0, 0.0
        else:
            power = alpha ** (g + 1)
            e, de = (1 - power) / (1 - alpha), -power * math.log(alpha) / (1 - alpha)
        if ns is None:
            d, dd = g * c + 1.0, c
        else:
            x = g + 1
            i = int(min(max(np.searchsorted(ns, x, side="right") - 1, 0), max(len(ns) - 2, 0)))
            seg = float(verify_ratio[i + 1] - verify_ratio[i]) if len(ns) > 1 else 0.0
            d, dd = g * c + float(np.interp(x, ns, verify_ratio)), c + seg
        return (de * d - e * dd) / (d * d)

    def f(g: float) -> float:
        return float(speedup_curve(alpha, c, g, verify_ratio))

    path = [min(max(float(start), lowest), highest)]
    length = 1.0
    for _ in range(steps):
        here, gradient = path[-1], slope(path[-1])
        if gradient == 0 or length < tolerance:
            break
        there = min(max(here + math.copysign(length, gradient), lowest), highest)
        if there != here and f(there) >= f(here):
            path.append(there)
            length *= 1.5
        else:
            length /= 2
    return path


def best_whole_gamma(alpha: float, c: float, gamma: float, lowest: int, highest: int, verify_ratio=None) -> int:
    """The best whole draft length next to a continuous optimum γ (f is unimodal in γ, so this is the
    integer argmax that the paper's Figure 3 plots)."""
    around = {int(min(max(k, lowest), highest)) for k in range(math.floor(gamma) - 1, math.floor(gamma) + 3)}
    return max(sorted(around), key=lambda k: float(speedup_curve(alpha, c, k, verify_ratio)))


def eesd_speedup(v_d, r_d, c):
    """EESD eq. 14: speedup = v_d / ((c − v_d)·r_d + v_d), from the time model of eq. 13
    T = (r_d·L / v_d)·T_d + (1 − r_d)·L·T_t, with c = T_d / T_t (the paper calls it α)."""
    v_d, r_d, c = (np.asarray(x, dtype=float) for x in (v_d, r_d, c))
    with np.errstate(divide="ignore", invalid="ignore"):
        return v_d / ((c - v_d) * r_d + v_d)


def harmonic_mean(v_d, r_d) -> float:
    """EESD Appendix D's HM of v_d (eq. 11) and r_d (eq. 12); 0 when both are 0."""
    return 2 * v_d * r_d / (v_d + r_d) if v_d + r_d > 0 else 0.0
