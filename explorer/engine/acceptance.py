"""The speculative sampling rule (Leviathan et al., Algorithm 1) as pure functions.

Notation as in the paper: ``p_target`` is the target's (warped) distribution, ``q_draft`` the draft's,
never swapped. For each drafted token x_i ~ q_i, in order:

    draw r_i ~ U(0, 1); accept x_i if r_i < p_i(x_i) / q_i(x_i)                       (accept w.p. min(1, p/q))
    at the first rejection, emit a correction ~ norm(max(0, p_i - q_i)) and stop       (the residual p')
    if all K are accepted, emit a bonus token ~ p_K                                    (one more for free)

The emitted token is distributed exactly as p (the paper's Theorem 3.5 / Appendix A.1). Greedy
verification is the limit of the same rule with one-hot p and q: accept the longest prefix of drafts
equal to the target's argmax, then emit the target's argmax.

Lenience l ∈ (0, 1] (Appendix A.5; l = 1 is the exact rule above, anything less is lossy): accept x_i
if r_i < p_i(x_i) / (l·q_i(x_i)) and correct from norm(max(0, p_i − l·q_i)); then no token is emitted with
more than 1/l times its target probability (accepted mass min(q, p/l), and the residual adds at most
p − l·q where p > l·q). Greedy (the paper's variant): accept x_i while p_i(x_i) ≥ l · max p_i, p the
target's softmax.

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
    lenient: tuple[int, ...] = ()  # positions accepted only because of lenience (the exact rule refuses them)


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
                       generator: torch.Generator | None, lenience: float = 1.0) -> Verdict:
    """Algorithm 1's accept/reject over K drafts: p_target (K+1, V), q_draft (K, V), drafted ids (K);
    ``lenience`` < 1: Appendix A.5's lossy rule (see the module docstring)."""
    k = len(drafted)
    if k == 0:
        return Verdict(0, sample(p_target[0], generator), "bonus")
    index = torch.tensor(drafted, device=p_target.device)  # (K,)
    rows = torch.arange(k, device=p_target.device)
    p_x = p_target[rows, index]  # (K,)
    q_x = q_draft[rows, index]  # (K,)
    r = torch.rand(k, generator=generator, device=p_target.device)  # (K,)
    # r < p/(l·q), written without dividing (q(x) > 0 for any x drawn from q)
    accepted = (r * lenience * q_x < p_x).tolist()
    n = accepted.index(False) if False in accepted else k
    uniforms = tuple(float(u) for u in r[: n + 1 if n < k else k].tolist())
    lenient = tuple(i for i in range(n) if not float(r[i] * q_x[i]) < float(p_x[i])) if lenience < 1 else ()
    if n == k:
        return Verdict(k, sample(p_target[k], generator), "bonus", uniforms, lenient=lenient)
    residual = residual_distribution(p_target[n], lenience * q_draft[n])
    return Verdict(n, sample(residual, generator), "corrected", uniforms, residual, lenient)


def greedy_accept(target_argmax: list[int], drafted: list[int], p_target: torch.Tensor | None = None,
                  lenience: float = 1.0) -> Verdict:
    """Prefix match: target_argmax has K+1 entries (one per verified position plus the bonus). With
    ``lenience`` < 1 (and the target's softmax ``p_target``, (K+1, V)), a draft also passes when the target
    gives it at least ``lenience`` × its top probability (Appendix A.5's greedy variant)."""
    n, lenient = 0, []
    for i, (draft_id, target_id) in enumerate(zip(drafted, target_argmax)):
        if draft_id != target_id:
            if lenience >= 1 or p_target is None or float(p_target[i, draft_id]) < lenience * float(p_target[i].max()):
                break
            lenient.append(i)
        n += 1
    return Verdict(n, int(target_argmax[n]), "bonus" if n == len(drafted) else "corrected", lenient=tuple(lenient))
