"""A Llama-style causal LM run with its products in low bits: the model's own decoder, every layer's four
matrix products and its LM head replaced by ``engine.lowbit`` ones, activations in their dtype (bfloat16).

The layers are ``FusedLlamaLayer``s over the given products, so they run the compiled layer
(``engine.compiled``, the low-bit kernels' family) where it fits, and take the same KV caches, rollback
and row buckets as every decode path (``engine.cache``). The embedding lookup, rotary tables and norm
weights are the model's own (cast); nothing of the model is changed or copied but the norm weights.

Shape legend: T new tokens, H hidden size, V vocabulary.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from . import kernels
from .layer_maths import rms_norm
from .fused_layer import FusedLlamaLayer
from .forward import decoder_parts, run_layers


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

    def forward(self, input_ids: torch.Tensor, cache: DynamicCache, n_logits: int) -> torch.Tensor:
        hidden = self.embed_tokens(input_ids).to(self.dtype)  # (1, T, H)
        hidden = run_layers(self, self.layers, hidden, cache.get_seq_length(), cache)
        return self.head(rms_norm(hidden[0, -n_logits:], *self.norm)).float()  # (n_logits, V)

    def compiled(self) -> bool:
        """Whether its layers run the compiled layer (else eagerly)."""
        return all(all(layer.compiled_buckets) for layer in self.layers)

    def weight_bytes(self) -> int:
        """Bytes its products read per forward (codes, scales; the head's)."""
        products = [p for layer in self.layers for p in (layer.qkv, layer.o_proj, layer.gate_up, layer.down_proj)]
        return sum(p.extra_bytes() for p in products + [self.head])
