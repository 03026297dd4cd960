"""KV caches kept in step with the token ids they hold.

``CachedForward`` pairs a forward function with its ``DynamicCache`` and the ids that cache covers. Each
call names the whole sequence it wants logits for; the cache is cut back to the longest prefix it shares
with that sequence (a rollback after a rejection) and only the rest is run, so an accepted prefix is
never computed twice. ``transformers`` 5.x ``DynamicCache.crop`` takes a negative count (tokens to
remove), hence ``crop_cache``.

Shape legend: T new tokens, V vocabulary.
"""

from __future__ import annotations

from typing import Callable

import torch
from transformers import DynamicCache

# (input_ids (1, T), cache, n_logits) -> logits (n_logits, V) for the last n_logits positions
ForwardFn = Callable[[torch.Tensor, DynamicCache, int], torch.Tensor]


def crop_cache(cache: DynamicCache, length: int) -> None:
    """Keep the first ``length`` positions of every layer."""
    excess = cache.get_seq_length() - length
    if excess > 0:
        cache.crop(-excess)


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two id lists."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:  # the usual case, compared at C speed
        return n
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class CachedForward:
    """A forward function, its KV cache and the ids the cache holds, always consistent."""

    def __init__(self, forward: ForwardFn, device: torch.device):
        self.forward = forward
        self.device = device
        self.cache = DynamicCache()
        self.ids: list[int] = []
        self.forwards = 0  # forward passes run so far

    def logits(self, sequence: list[int], n_logits: int = 1) -> torch.Tensor:
        """Logits (n_logits, V) predicting the tokens after each of the last ``n_logits`` positions.

        Reuses the cached prefix; the last ``n_logits`` tokens are always run (their logits are needed).
        """
        keep = min(common_prefix(self.ids, sequence), len(sequence) - n_logits)
        self.truncate(keep)
        new = torch.tensor([sequence[keep:]], dtype=torch.long, device=self.device)  # (1, T)
        with torch.inference_mode():
            out = self.forward(new, self.cache, n_logits)
        self.ids = list(sequence)
        self.forwards += 1
        return out

    def truncate(self, length: int) -> None:
        """Drop every cached position from ``length`` on (the rollback after a rejection)."""
        if length < len(self.ids):
            crop_cache(self.cache, length)
            del self.ids[length:]

    @property
    def cached_len(self) -> int:
        return self.cache.get_seq_length()
