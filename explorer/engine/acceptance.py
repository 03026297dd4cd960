"""The speculative sampling rule (Leviathan et al., Algorithm 1) as pure functions.

Notation as in the paper: ``p_target`` is the target's (warped) distribution, ``q_draft`` the draft's,
never swapped. For each drafted token x_i ~ q_i, in order:

    draw r_i ~ U(0, 1); accept x_i if r_i < p_i(x_i) / q_i(x_i)                       (accept w.p. min(1, p/q))
    at the first rejection, emit a correction ~ norm(max(0, p_i - q_i)) and stop       (the residual p')
    if all K are accepted, emit a bonus token ~ p_K                                    (one more for free)

The emitted token is distributed exactly as p (the paper's Theorem 3.5 / Appendix A.1). Greedy
verification is the limit of the same rule with one-hot p and q: accept the longest prefix of drafts
equal to the target's argmax, then emit the target's argmax.

Shape legend: K drafted tokens, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .sampling import sample


@dataclass(frozen=True)
class Verdict:
    """What verification decided for one round.

    ``next_kind`` is ``"corrected"`` (drawn from the residual after a rejection) or ``"bonus"`` (drawn
    from p_K after all K drafts were accepted). ``uniforms`` are the r_i actually compared (empty when
    greedy). ``residual`` is the distribution the correction was drawn from (None otherwise).
    """

    n_accepted: int
    next_token: int
    next_kind: str
    uniforms: tuple[float, ...] = ()
    residual: torch.Tensor | None = None


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)) for one position (V,).

    Mathematically it never sums to zero at a rejection (a rejection needs q(x) > p(x), so some other
    token has p > q), but rounding can make it so when p and q are nearly equal; then p itself is the
    right fallback (the rejection probability was ~0 anyway).
    """
    residual = (p - q).clamp_min(0.0)
    total = residual.sum()
    if not torch.isfinite(total) or total <= 0:
        return p / p.sum()
    return residual / total


def speculative_accept(p_target: torch.Tensor, q_draft: torch.Tensor, drafted: list[int],
                       generator: torch.Generator | None) -> Verdict:
    """Algorithm 1's accept/reject over K drafts: p_target (K+1, V), q_draft (K, V), drafted ids (K)."""
    k = len(drafted)
    if k == 0:
        return Verdict(0, sample(p_target[0], generator), "bonus")
    index = torch.tensor(drafted, device=p_target.device)  # (K,)
    rows = torch.arange(k, device=p_target.device)
    p_x = p_target[rows, index]  # (K,)
    q_x = q_draft[rows, index]  # (K,)
    r = torch.rand(k, generator=generator, device=p_target.device)  # (K,)
    # r < p/q, written without dividing (q(x) > 0 for any x drawn from q)
    accepted = (r * q_x < p_x).tolist()
    n = accepted.index(False) if False in accepted else k
    uniforms = tuple(float(u) for u in r[: n + 1 if n < k else k].tolist())
    if n == k:
        return Verdict(k, sample(p_target[k], generator), "bonus", uniforms)
    residual = residual_distribution(p_target[n], q_draft[n])
    return Verdict(n, sample(residual, generator), "corrected", uniforms, residual)


def greedy_accept(target_argmax: list[int], drafted: list[int]) -> Verdict:
    """Prefix match: target_argmax has K+1 entries (one per verified position plus the bonus)."""
    n = 0
    for draft_id, target_id in zip(drafted, target_argmax):
        if draft_id != target_id:
            break
        n += 1
    return Verdict(n, int(target_argmax[n]), "bonus" if n == len(drafted) else "corrected")
