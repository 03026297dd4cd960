"""A pool of single-sequence KV caches for a method that runs several sequences (rows) sharing prefixes:
one forward per row, through the cache that shares the longest prefix with it, so a row that branches off
another recomputes only what differs."""

from __future__ import annotations

import torch

from .cache import CachedForward, ForwardFn, common_prefix


class KVPool:
    """Forwards for rows through ``size`` KV caches; a row takes the cache that shares the longest prefix
    with it (not one already used for this batch of rows while a fresh one is left)."""

    def __init__(self, forward: ForwardFn, device: torch.device, size: int):
        self.runners = [CachedForward(forward, device) for _ in range(size)]

    def logprobs(self, rows: list[list[int]], n_logits: list[int]) -> list[torch.Tensor]:
        """For each row, (n, V) log-probabilities after each of its last n positions."""
        used: set[int] = set()
        out = []
        for row, n in zip(rows, n_logits):
            free = [i for i in range(len(self.runners)) if i not in used] or list(range(len(self.runners)))
            pick = max(free, key=lambda i: common_prefix(self.runners[i].ids, row))
            used.add(pick)
            out.append(self.runners[pick].logits(row, n).float().log_softmax(dim=-1))
        return out

    @property
    def forwards(self) -> int:
        """Forwards run so far, over every cache of the pool."""
        return sum(r.forwards for r in self.runners)
