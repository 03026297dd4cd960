"""Forward functions over a shared, read-only model, and the decoder parts an early-exit draft uses.

``full_forward`` is the whole causal LM, with the LM head from ``lm_head`` (below). ``fast_decoder`` hands
the Llama-style decoder stack (embedding, layers, norm, rotary embedding) to ``engine.self_draft``, which
runs the first N layers as the draft and the rest as verification over one cache (EESD 3.1), and to
``engine.bita``. All three run the model's fast view (``engine.fast``); the model is never patched.

Shape legend: V vocabulary.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from ..errors import ExplorerError
from .fast import fast_view


def full_forward(model: torch.nn.Module):
    """The whole causal LM on its fast view (``engine.fast``: linears packed on CPU fp32, the model
    untouched); only the last ``n_logits`` positions go through the LM head."""
    view = fast_view(model)
    base, head = getattr(view, "model", None), view.get_output_embeddings()
    if base is None or not hasattr(base, "layers"):
        def forward(input_ids: torch.Tensor, cache: DynamicCache, n_logits: int) -> torch.Tensor:
            out = view(input_ids=input_ids, past_key_values=cache, use_cache=True, logits_to_keep=n_logits)
            return out.logits[0]  # (n_logits, V)
        return forward

    def forward(input_ids: torch.Tensor, cache: DynamicCache, n_logits: int) -> torch.Tensor:
        hidden = base(input_ids=input_ids, past_key_values=cache, use_cache=True).last_hidden_state
        return head(hidden[0, -n_logits:])  # (n_logits, V)

    return forward


def lm_head(model: torch.nn.Module) -> torch.nn.Module:
    """The model's LM head as a function of final states (…, H) -> (…, V), from its fast view: on the CPU
    in float32 the 49152 × 576 head of the default model is the largest single matmul of a decoding
    step (≈ 5.8 ms packed for one row and ≈ 12 ms for 2–8, against ≈ 10.9 and ≈ 24 ms through MKL)."""
    return fast_view(model).get_output_embeddings()


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


def fast_decoder(model: torch.nn.Module):
    """``decoder_parts`` of the model's fast view (``engine.fast``): what the decode paths run. The
    trainers use ``decoder_parts`` itself (the packed kernel has no gradient)."""
    decoder_parts(model)  # the refusal, on the model itself
    return fast_view(model).model
