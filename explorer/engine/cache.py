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
from transformers.cache_utils import DynamicLayer

# (input_ids (1, T), cache, n_logits) -> logits (n_logits, V) for the last n_logits positions
ForwardFn = Callable[[torch.Tensor, DynamicCache, int], torch.Tensor]


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys and values are prefix views of buffers with room to grow.

    ``DynamicLayer.update`` appends by ``torch.cat``, which copies the whole cache every step: 60 copies
    of the context per forward on the default model, ≈ 2.5 ms of a ≈ 45 ms one-token forward on this
    CPU at a 128-token context, growing with the context. Here appending T positions copies T positions;
    the buffer doubles when full. Cropping (``DynamicLayer.crop``) and BiTA's compaction keep prefix
    views of the same buffer, so they need no change; anything else assigned to ``keys`` / ``values``
    is copied into a fresh buffer on the next update.

    Shape legend: B batch, G key/value heads, S cached positions, T new positions, D head size.
    """

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.keys, self._key_buffer = _append(self.keys, getattr(self, "_key_buffer", None), key_states)
        self.values, self._value_buffer = _append(self.values, getattr(self, "_value_buffer", None), value_states)
        return self.keys, self.values


def _append(view: torch.Tensor, buffer: torch.Tensor | None, new: torch.Tensor):
    """``view`` (B, G, S, D) followed by ``new`` (B, G, T, D), as a prefix view of ``buffer`` (made or
    grown when ``view`` is not a prefix of it or it has no room)."""
    s = view.shape[-2] if view.dim() == 4 else 0
    t = new.shape[-2]
    fits = (buffer is not None and s + t <= buffer.shape[-2] and view.dim() == 4
            and view.data_ptr() == buffer.data_ptr() and view.stride() == buffer.stride())
    if not fits:
        b, g, _, d = new.shape
        grown = new.new_empty(b, g, max(2 * (s + t), 64), d)  # (B, G, capacity, D)
        if s:
            grown[:, :, :s] = view
        buffer = grown
    buffer[:, :, s:s + t] = new
    return buffer[:, :, :s + t], buffer


def new_cache() -> DynamicCache:
    """An empty KV cache whose layers grow in place (``GrowingLayer``): what every decode path uses."""
    cache = DynamicCache()
    cache.layer_class_to_replicate = GrowingLayer
    return cache


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
        self.cache = new_cache()
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
