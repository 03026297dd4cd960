"""The Jacobi window of a lookahead round (Fu et al., arXiv 2402.02057, Figure 2(b)): which of the window's rows
sees which. The round's trace keeps the window as ``detail["levels"]`` (oldest Jacobi step first, each W guesses);
the method builds its forward's mask from this rule and the view draws it from the same rule. Plain Python."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=64)
def window_visibility(n_levels: int, width: int) -> tuple[tuple[bool, ...], ...]:
    """(E, E) over a window's rows, level by level: level l's column j sees level 0's columns 0 … j and column j of
    levels 1 … l (itself included) — the lookahead branch of the paper's Figure 2(b)."""
    size = n_levels * width
    rows = []
    for l in range(n_levels):
        for j in range(width):
            seen = {*range(j + 1), *(above * width + j for above in range(1, l + 1))}
            rows.append(tuple(k in seen for k in range(size)))
    return tuple(rows)
