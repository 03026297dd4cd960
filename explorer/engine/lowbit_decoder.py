"""A Llama-style causal LM run with its products in low bits: the model's own decoder, every layer's four
matrix products and its LM head replaced by ``engine.lowbit`` ones, activations in their dtype (bfloat16).

The layers are ``FusedLlamaLayer``s over the given products, so they run the compiled layer
(``engine.compiled``, the low-bit kernels' family) where it fits, and take the same KV caches, rollback
and row buckets as every decode path (``engine.cache``). The embedding lookup, rotary tables and norm
weights are the model's own (cast); nothing of the model is changed or copied but the norm weights.

Shape legend: T new tokens, H hidden size, V vocabulary.
"""

from __future__ import annotations

import operator
import os

import torch
from transformers import DynamicCache

from . import compiled, kernels
from .cache import GrowingLayer, cache_layer
from .layer_maths import rms_norm
from .lowbit import ShortlistHead
from .fused_layer import FusedLlamaLayer
from .forward import decoder_parts, run_layers
from .switches import ThreadSwitch
from .trie_cache import TrieCache


class LowBitDecoder(torch.nn.Module):
    """``forward(input_ids (1, T), cache, n_logits)`` -> float32 logits (n_logits, V), the ``ForwardFn`` of
    ``engine.cache``. ``layer_products[i]``: layer i's (q/k/v, o, gate/up, down) products, all in ``dtype``;
    ``head``: the LM head, (…, H) -> (…, V) (``lowbit.ShortlistHead``: exact where it matters)."""

    def __init__(self, model: torch.nn.Module, layer_products: list[tuple], head: torch.nn.Module,
                 dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        base = decoder_parts(model)
        if not all(FusedLlamaLayer.fits(layer) for layer in base.layers):
            raise ValueError("a low-bit copy needs plain Llama decoder layers")
        self.dtype = dtype
        self.embed_tokens = base.embed_tokens  # the model's own lookup; its rows are cast after
        self.rotary_emb = base.rotary_emb
        self.layers = torch.nn.ModuleList(FusedLlamaLayer(layer, products=products)
                                          for layer, products in zip(base.layers, layer_products))
        for layer in self.layers:
            layer.bind(kernels.BUCKETS)  # the low-bit products run one compiled family whatever the row count
        self.norm = (base.norm.weight.detach().to(dtype), base.norm.variance_epsilon)
        self.head = head
        self._step_weights = _whole_step_weights(self.layers, dtype, head, self.norm, self.embed_tokens)
        self._head_weights = None if self._step_weights is None else [self.norm[0], *head.coarse.tensors, head.weight]
        self._rotary = RotaryTable(self.rotary_emb, dtype)

    def forward(self, input_ids: torch.Tensor, cache: DynamicCache, n_logits: int) -> torch.Tensor:
        if input_ids.shape[1] == 1:
            logits = self._whole_step(int(input_ids[0, 0]), cache)
            if logits is not None:
                return logits
        hidden = self.embed_tokens(input_ids).to(self.dtype)  # (1, T, H)
        out = run_layers(self, self.layers, hidden, cache.get_seq_length(), cache)
        return self.head(rms_norm(out[0, -n_logits:], *self.norm)).float()  # (n_logits, V)

    def row_scorer(self, device: torch.device) -> TrieCache:
        """The copy as a ``TrieCache``: several sequences' log-probabilities in one forward (beam's draft beams)."""
        return TrieCache(self, [self.layers], lambda h: rms_norm(h, *self.norm), self.head, device, dtype=self.dtype)

    def whole_step(self) -> bool:
        """Whether a one-token forward runs in one call of ``engine.q4_vnni``'s step (every layer and the head)."""
        return self._step_weights is not None and _whole_step_on()

    def _whole_step(self, token: int, cache: DynamicCache) -> torch.Tensor | None:
        """Logits (1, V) of one new token in one call (``q4_vnni.cpp``'s ``step``: the embedding row, every layer as
        the compiled layer computes it, the ``ShortlistHead``), writing each layer's KV buffers at the cached length;
        None where it cannot run (the caller runs the layers one by one)."""
        if not self.whole_step() or compiled.paused():
            return None
        plan = getattr(cache, "step_plan", None)  # kept on the cache: one cache is one run's, on one thread
        if plan is None or not plan.ready(cache):
            plan = cache.step_plan = StepPlan.make(cache, self.layers)
            if plan is None:
                return None
        past = plan.length
        first = self.layers[0]
        out = torch.ops.explorer_q4.step(self.embed_tokens.weight, token, self._step_weights, plan.keys, plan.values,
                                         past, *self._rotary.at(past), float(first.norm_in[1]), float(first.scaling),
                                         first.q_size // first.head_dim, self._head_weights, self.head.k)
        plan.advance(out[1:])
        return out[0]

    def compiled(self) -> bool:
        """Whether its layers run the compiled layer (else eagerly)."""
        return all(all(layer.compiled_buckets) for layer in self.layers)

    def weight_bytes(self) -> int:
        """Bytes its products read per forward (codes, scales; the head's)."""
        products = [p for layer in self.layers for p in (layer.qkv, layer.o_proj, layer.gate_up, layer.down_proj)]
        return sum(p.extra_bytes() for p in products + [self.head])


_LAYERED = ThreadSwitch()


def layer_by_layer():
    """Run one-token steps layer by layer inside this block, on this thread (``explorer profile`` times both)."""
    return _LAYERED.block()


def _whole_step_on() -> bool:
    """``EXPLORER_WHOLE_STEP=0`` turns the one-call step off (read on every call, as ``EXPLORER_Q4_VNNI``), and so
    does ``layer_by_layer``."""
    if _LAYERED.on():
        return False
    return os.environ.get("EXPLORER_WHOLE_STEP", "1").strip().lower() not in ("0", "false", "no", "off")


def _whole_step_weights(layers, dtype: torch.dtype, head, norm: tuple, embed) -> list[torch.Tensor] | None:
    """The one-call step's weights, 10 a layer (the four products' codes and scales, the two norm weights), where
    the step computes the copy's function: bfloat16, the VNNI kernel's products without biases, SiLU, one ε (the
    final norm's too), a ``ShortlistHead`` over the same kernel with the model's rows and embedding in float32 or
    bfloat16, on the CPU; else None."""
    if dtype != torch.bfloat16 or not layers or not isinstance(head, ShortlistHead) \
            or head.coarse.compiled_form(None)[0] != "int4x8" \
            or head.weight.dtype not in (torch.float32, torch.bfloat16) \
            or not head.weight.is_contiguous() or norm[1] != layers[0].norm_in[1] \
            or embed.weight.dtype not in (torch.float32, torch.bfloat16) or not embed.weight.is_contiguous():
        return None
    weights = []
    for layer in layers:
        products = (layer.qkv, layer.o_proj, layer.gate_up, layer.down_proj)
        forms = [p.compiled_form(None) for p in products]  # LayerProducts (engine.products): how a kernel takes them
        if not layer.silu or any(form is None or form[0] != "int4x8" for form in forms) \
                or any(p.bias_tensor is not None for p in products) \
                or layer.norm_post[1] != layer.norm_in[1] or layer.norm_in[1] != layers[0].norm_in[1] \
                or layer.norm_in[0].device.type != "cpu":
            return None
        weights += [t for _, tensors in forms for t in tensors] + [layer.norm_in[0], layer.norm_post[0]]
    return weights


class StepPlan:
    """The KV buffers a cache's one-call steps write into, kept on the cache from one step to the next: a draft's
    steps each add one position to the same buffers, so checking that every layer still holds the views the last
    step left (nothing cropped, replaced or grew them) replaces 30 layers' ``reserve`` and ``advance`` in Python
    (≈ 0.2 ms a step here)."""

    def __init__(self, layers: list[GrowingLayer], keys: list[torch.Tensor], values: list[torch.Tensor]):
        self.layers = layers
        self.keys, self.values = keys, values  # each layer's buffers (1, G, C, D)
        self.held = [c.keys for c in layers] + [c.values for c in layers]  # the views the layers hold: keys, values
        self.length = layers[0].get_seq_length()  # the positions every layer holds

    @staticmethod
    def make(cache: DynamicCache, decoder_layers) -> "StepPlan | None":
        """Room for one position in every layer of ``cache`` (``GrowingLayer.reserve``), or None where the layers do
        not hold one length in contiguous buffers of one shape (the layers then run one by one)."""
        layers = [cache_layer(cache, layer.layer_idx) for layer in decoder_layers]
        if not all(isinstance(c, GrowingLayer) for c in layers):
            return None
        past = layers[0].get_seq_length()
        if not all(c.get_seq_length() == past for c in layers):
            return None
        reserved = [c.reserve(layer._kv_like, 1) for c, layer in zip(layers, decoder_layers)]
        keys, values = [r[0] for r in reserved], [r[1] for r in reserved]
        if not all(k.is_contiguous() and v.is_contiguous() and k.shape == keys[0].shape == v.shape
                   for k, v in zip(keys, values)):
            return None
        return StepPlan(layers, keys, values)

    def ready(self, cache: DynamicCache) -> bool:
        """Whether ``cache`` still has these layers, each holding the views the last step left, with room for one
        more position in the buffers."""
        n = len(self.layers)
        return (self.length < self.keys[0].shape[2] and len(cache.layers) >= n
                and all(map(operator.is_, self.layers, cache.layers))
                and all(map(operator.is_, self.held, (c.keys for c in self.layers)))
                and all(map(operator.is_, self.held[n:], (c.values for c in self.layers))))

    def advance(self, views: list[torch.Tensor]) -> None:
        """The step wrote one position into every buffer: each layer now holds ``views`` (keys, then values)."""
        n = len(self.layers)
        for c, k, v in zip(self.layers, views[:n], views[n:]):
            c.keys, c.values = k, v
        self.held = list(views)
        self.length += 1


class RotaryTable:
    """The rotary embedding's (cos, sin) rows by position, computed by the model's own ``rotary_emb`` for a block of
    positions at a time and kept: one row is a lookup, not a module call (≈ 0.15 ms a step here). Each position's row
    is the same function of that position alone whatever the block (``inv_freq`` × position, then cos and sin), except
    for the RoPE types that rescale with the sequence's length, which are computed every time."""

    def __init__(self, rotary_emb: torch.nn.Module, dtype: torch.dtype):
        self.rotary_emb, self.dtype = rotary_emb, dtype
        self.rows: tuple[torch.Tensor, torch.Tensor] | None = None  # (cos, sin) (N, D): one tuple, replaced whole
        self.kept = getattr(rotary_emb, "rope_type", "default") not in ("dynamic", "longrope")

    def at(self, position: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) (D) of ``position``, in the copy's activation dtype, as ``rotary_emb`` gives them."""
        if not self.kept:
            cos, sin = self._rows(torch.tensor([[position]]))
            return cos[0], sin[0]
        rows = self.rows  # read once: another thread may replace it with a longer table meanwhile
        if rows is None or position >= rows[0].shape[0]:
            rows = self.rows = self._rows(torch.arange(max(2 * position, 256))[None])
        return rows[0][position], rows[1][position]

    def _rows(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        like = torch.empty(1, 1, dtype=self.dtype)
        cos, sin = self.rotary_emb(like, position_ids=positions)  # (1, N, D) each
        return cos[0], sin[0]
