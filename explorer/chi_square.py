"""Pearson's χ² test of sampled tokens' counts against a distribution: what the sampling audit (``explorer.audit``)
asks of a method's first token, and the bin rule its figure (``viz.audit``) draws. A leaf: the audit runs the
engine, the figure must not, and both read the rule here.
"""

from __future__ import annotations

MIN_EXPECTED = 5.0  # χ²'s rule of thumb: tokens expected fewer times than this share one "other" bin


def chi_square(counts: dict[int, int], probs: dict[int, float], runs: int) -> tuple[float, int, float, tuple, int]:
    """Pearson's χ² of token counts against ``probs`` (token → p, the tokens with p > 0): tokens expected
    ≥ ``MIN_EXPECTED`` times get a bin each, the rest share one. Returns (χ², dof, p-value, bins,
    draws of impossible tokens); any impossible draw makes the p-value 0."""
    import torch

    impossible = sum(n for t, n in counts.items() if probs.get(t, 0.0) <= 0)
    ranked = sorted(probs.items(), key=lambda kv: -kv[1])
    bins = [(t, counts.get(t, 0), runs * p) for t, p in ranked if runs * p >= MIN_EXPECTED]
    kept = {t for t, _, _ in bins}
    rest_seen = sum(n for t, n in counts.items() if t not in kept and probs.get(t, 0.0) > 0)
    rest_expected = runs * sum(p for t, p in ranked if t not in kept)
    if rest_expected > 1e-9:
        if rest_expected >= MIN_EXPECTED or not bins:
            bins.append((None, rest_seen, rest_expected))
        else:  # too small for a bin of its own: fold it into the least likely kept one
            t, n, e = bins[-1]
            bins[-1] = (t, n + rest_seen, e + rest_expected)
    chi2 = sum((n - e) ** 2 / e for _, n, e in bins if e > 0)
    dof = max(1, len(bins) - 1)
    p_value = float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                            torch.tensor(chi2 / 2, dtype=torch.float64)))
    if len(bins) < 2:  # one token takes all the mass: nothing to test but impossible draws
        chi2, p_value = 0.0, 1.0
    return chi2, dof, 0.0 if impossible else p_value, tuple(bins), impossible
