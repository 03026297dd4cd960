"""A Llama-style causal LM run with its products in low bits: the model's own decoder, every layer's four
matrix products and its LM head replaced by ``engine.lowbit`` ones, activations in their dtype (bfloat16).

The layers are ``FusedLlamaLayer``s over the given products, so they run the compiled layer
(``engine.compiled``, the low-bit kernels' family) where it fits, and take the same KV caches, rollback
and row buckets as every decode path (``engine.cache``). The embedding lookup, rotary tables and norm
weights are the model's own (cast); nothing of the model is changed or copied but the norm weights.

Shape legend: T new tokens, H hidden size, V vocabulary.
"""

from __future__ import annotations

import os

import torch
from transformers import DynamicCache

from . import compiled, kernels
from .cache import GrowingLayer, cache_layer
from .layer_maths import rms_norm
from .fused_layer import FusedLlamaLayer
from .forward import decoder_parts, run_layers
from .switches import ThreadSwitch


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
        self._step_weights = _whole_step_weights(self.layers, dtype)

    def forward(self, input_ids: torch.Tensor, cache: DynamicCache, n_logits: int) -> torch.Tensor:
        hidden = self.embed_tokens(input_ids).to(self.dtype)  # (1, T, H)
        past = cache.get_seq_length()
        out = self._whole_step(hidden, past, cache) if input_ids.shape[1] == 1 else None
        if out is None:
            out = run_layers(self, self.layers, hidden, past, cache)
        return self.head(rms_norm(out[0, -n_logits:], *self.norm)).float()  # (n_logits, V)

    def whole_step(self) -> bool:
        """Whether a one-token forward runs every layer in one call of ``engine.q4_vnni``'s step."""
        return self._step_weights is not None and _whole_step_on()

    def _whole_step(self, hidden: torch.Tensor, past: int, cache: DynamicCache) -> torch.Tensor | None:
        """Every layer over one new token in one call (``q4_vnni.cpp``'s ``step``: the layer's own function, its
        bfloat16 roundings, one loop), writing each layer's KV buffers at ``past``; None where it cannot run (the
        caller runs the layers one by one)."""
        if not self.whole_step() or compiled.paused() or hidden.shape[0] != 1:
            return None
        layers = [cache_layer(cache, layer.layer_idx) for layer in self.layers]
        if not all(isinstance(c, GrowingLayer) and c.get_seq_length() == past for c in layers):
            return None
        reserved = [c.reserve(layer._kv_like, 1) for c, layer in zip(layers, self.layers)]
        keys, values = [r[0] for r in reserved], [r[1] for r in reserved]
        if not all(k.is_contiguous() and v.is_contiguous() and k.shape == keys[0].shape for k, v in zip(keys, values)):
            return None
        position = torch.tensor([[past]])
        cos, sin = self.rotary_emb(hidden, position_ids=position)  # (1, 1, D) each
        first = self.layers[0]
        out = torch.ops.explorer_q4.step(hidden, self._step_weights, keys, values, past, cos, sin,
                                         float(first.norm_in[1]), float(first.scaling), first.q_size // first.head_dim)
        for c in layers:
            c.advance(1)
        return out

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


def _whole_step_weights(layers, dtype: torch.dtype) -> list[torch.Tensor] | None:
    """The one-call step's weights, 10 a layer (the four products' codes and scales, the two norm weights), where
    every layer can take it: bfloat16, the VNNI kernel's products without biases, SiLU, one ε; else None."""
    if dtype != torch.bfloat16 or not layers:
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
