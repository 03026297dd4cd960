"""What the self-distillation trainers share once the data is there: the draft's vocabulary, the KL to the
target's top-K, the learning-rate schedule and which windows a step reads.

``draft_vocab``   the V' most frequent answer tokens (+ EOS): the rows a draft's LM head scores
``kl_topk``       KL(p_target || q_draft) over the target's top-K, renormalised over the ids the draft scores
``step_windows``  step s reads the next windows of a seeded permutation per epoch: a function of (seed, s), so
                  a resumed run repeats exactly what an uninterrupted one would have done
``lr_factor``     linear warm-up, then a cosine decay to a floor

Shape legend: P loss positions, K teacher entries, V' draft vocabulary.
"""

from __future__ import annotations

import math

import torch


def draft_vocab(samples, size: int | None, vocab_size: int, eos: frozenset[int]) -> torch.Tensor | None:
    """The ``size`` most frequent answer tokens (ties: lower id first) and the EOS ids, sorted; None for
    the whole vocabulary."""
    if size is None or size >= vocab_size:
        return None
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for s in samples:
        counts += torch.bincount(torch.tensor(s.answer_ids, dtype=torch.long), minlength=vocab_size)
    ends = sorted(eos)
    counts[ends] = -1  # added below, whatever their count
    order = torch.argsort(-counts, stable=True)[: max(size - len(ends), 0)]  # most frequent first, ties by id
    return torch.cat([torch.tensor(ends, dtype=torch.long), order]).sort().values


def remap(vocab: torch.Tensor | None, size: int) -> torch.Tensor | None:
    """Full id -> draft row (-1 where the draft does not score the id)."""
    if vocab is None:
        return None
    table = torch.full((size,), -1, dtype=torch.long)
    table[vocab] = torch.arange(vocab.numel())
    return table


def head_rows(model: torch.nn.Module, vocab: torch.Tensor | None) -> torch.Tensor:
    """The LM head's weight (V, H), or its scored rows (V', H)."""
    weight = model.get_output_embeddings().weight.detach()
    return weight if vocab is None else weight[vocab]


def kl_topk(logq: torch.Tensor, top_ids: torch.Tensor, top_logp: torch.Tensor,
            rows: torch.Tensor | None) -> torch.Tensor:
    """Mean KL(p || q) with p the target's top-K (P, K) renormalised over the ids the draft can score and
    q the draft's log-probabilities (P, V'); ``rows`` maps ids to draft rows (``remap``), None = identity."""
    top_ids, top_logp = top_ids.to(logq.device), top_logp.to(logq.device).float()
    index = rows.to(logq.device)[top_ids] if rows is not None else top_ids  # (P, K): draft row, -1 if none
    keep = index >= 0
    logp = top_logp.masked_fill(~keep, float("-inf"))
    logp = logp - torch.logsumexp(logp, dim=-1, keepdim=True)  # (P, K)
    p = logp.exp()
    q = logq.gather(-1, index.clamp(min=0))  # (P, K)
    return (p * (logp.masked_fill(~keep, 0) - q)).sum(-1).mean()


def step_windows(step: int, count: int, batch: int, seed: int) -> torch.Tensor:
    """Step s takes the next ``batch`` windows of a seeded permutation per epoch: a function of (seed, s)."""
    index = [step * batch + j for j in range(batch)]
    epochs = {i // count for i in index}
    perms = {e: torch.randperm(count, generator=torch.Generator().manual_seed(seed * 100_003 + e)) for e in epochs}
    return torch.stack([perms[i // count][i % count] for i in index])


def lr_factor(step: int, steps: int, warmup: float, floor: float = 0.1) -> float:
    """Linear warm-up over ``warmup`` of the steps, then a cosine from 1 down to ``floor``."""
    warm = max(int(warmup * steps), 1)
    if step < warm:
        return (step + 1) / warm
    return floor + (1 - floor) / 2 * (1 + math.cos(math.pi * (step - warm) / max(steps - warm, 1)))


def chunks(count: int, size: int):
    """Slices of ``size`` over ``count`` rows."""
    for lo in range(0, count, size):
        yield slice(lo, min(lo + size, count))
