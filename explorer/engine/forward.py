"""Forward functions over a shared, read-only model, and the decoder parts an early-exit draft uses.

``full_forward`` is the whole causal LM. ``decoder_parts`` hands the Llama-style decoder stack
(embedding, layers, norm, rotary embedding) to ``engine.self_draft``, which runs the first N layers as
the draft and the rest as verification over one cache (EESD 3.1); the model is never patched or copied.

Shape legend: V vocabulary.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from ..errors import ExplorerError


def full_forward(model: torch.nn.Module):
    """The whole causal LM; only the last ``n_logits`` positions go through the LM head."""

    def forward(input_ids: torch.Tensor, cache: DynamicCache, n_logits: int) -> torch.Tensor:
        out = model(input_ids=input_ids, past_key_values=cache, use_cache=True, logits_to_keep=n_logits)
        return out.logits[0]  # (n_logits, V)

    return forward


def decoder_parts(model: torch.nn.Module):
    """The decoder stack of a Llama-style causal LM, or a clear refusal."""
    base = getattr(model, "model", None)
    needed = ("embed_tokens", "layers", "norm", "rotary_emb")
    if base is None or not all(hasattr(base, n) for n in needed) or model.get_output_embeddings() is None:
        raise ExplorerError(
            f"early-exit drafts need a Llama-style decoder (model.model.layers, norm, rotary_emb); "
            f"{type(model).__name__} has another layout: use a 'model:<name>' draft instead"
        )
    kinds = set(getattr(model.config, "layer_types", None) or ["full_attention"])
    if kinds != {"full_attention"}:
        raise ExplorerError(f"early-exit drafts support full-attention layers only, not {sorted(kinds)}")
    return base
