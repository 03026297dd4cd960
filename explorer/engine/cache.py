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
    is copied into a fresh buffer on the next update. The compiled layer (``engine.compiled``) writes into
    the buffers itself: ``reserve`` makes room, ``advance`` extends the views over what it wrote.

    Shape legend: B batch, G key/value heads, S cached positions, T new positions, C capacity, D head size.
    """

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        t = key_states.shape[-2]
        keys, values, s = self.reserve(key_states, t)
        keys[:, :, s:s + t] = key_states
        values[:, :, s:s + t] = value_states
        self.advance(t)
        return self.keys, self.values

    def reserve(self, like: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Buffers (B, G, C, D) whose first S positions hold this layer's keys and values, with room for
        ``t`` more, and S. ``like`` (B, G, ·, D) gives the shape, dtype and device of a new buffer."""
        if not self.is_initialized:
            self.lazy_initialization(like, like)
        keys, buffer = self.keys, getattr(self, "_key_buffer", None)
        if buffer is not None and keys.dim() == 4 and keys.shape[-2] + t <= buffer.shape[-2] \
                and keys.data_ptr() == buffer.data_ptr() and self.values.data_ptr() == self._value_buffer.data_ptr() \
                and keys.stride() == buffer.stride() and self.values.stride() == buffer.stride():
            return buffer, self._value_buffer, keys.shape[-2]  # the usual case: both are prefixes with room
        self.keys, self._key_buffer = _room(keys, buffer, like, t)
        self.values, self._value_buffer = _room(self.values, getattr(self, "_value_buffer", None), like, t)
        return self._key_buffer, self._value_buffer, self.keys.shape[-2]

    def advance(self, t: int) -> None:
        """The ``t`` positions after the held ones in the reserved buffers are now held too."""
        s = self.keys.shape[-2] + t
        self.keys, self.values = self._key_buffer[:, :, :s], self._value_buffer[:, :, :s]


def _room(view: torch.Tensor, buffer: torch.Tensor | None, like: torch.Tensor, t: int):
    """``view`` (B, G, S, D) as a prefix view of a buffer with room for ``t`` more positions: ``buffer``
    itself when ``view`` is its prefix and it has the room, else a new one (twice what is needed)."""
    s = view.shape[-2] if view.dim() == 4 else 0
    fits = (buffer is not None and s + t <= buffer.shape[-2] and view.dim() == 4
            and view.data_ptr() == buffer.data_ptr() and view.stride() == buffer.stride())
    if not fits:
        b, g, _, d = like.shape
        grown = like.new_empty(b, g, max(2 * (s + t), 64), d)  # (B, G, C, D)
        if s:
            grown[:, :, :s] = view
        buffer = grown
    return buffer[:, :, :s], buffer


def cache_layer(cache: DynamicCache, index: int):
    """Layer ``index`` of ``cache``, made as ``cache.update`` would make it when it is not there yet."""
    if cache.layer_class_to_replicate is not None:
        while len(cache.layers) <= index:
            cache.layers.append(cache.layer_class_to_replicate())
    return cache.layers[index] if index < len(cache.layers) else None


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
