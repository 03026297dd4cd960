"""Forward functions over a shared, read-only model, and the decoder parts an early-exit draft uses.

``full_forward`` is the whole causal LM, with the LM head from ``lm_head`` (below). ``fast_decoder`` hands
the Llama-style decoder stack (embedding, layers, norm, rotary embedding) to EESD's
``methods.eesd.self_draft``, which runs the first N layers as the draft and the rest as verification over
one cache (EESD 3.1), and to BiTA's ``methods.bita.tree``. All three run the model's fast view (``engine.fast``); the model is never patched.

Shape legend: V vocabulary.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from ..errors import ExplorerError
from . import cuda_graphs
from .fast import fast_view
from .fused_layer import run_compiled


def full_forward(model: torch.nn.Module):
    """The whole causal LM on its fast view (``engine.fast``: linears packed on CPU fp32, the model
    untouched); only the last ``n_logits`` positions go through the LM head. A Llama-style decoder runs
    its layers in ``run_layers``' loop (≈ 2 ms a forward less than the model's own ``forward`` on the
    default model here: no mask builder, no output objects); any other model runs its own forward."""
    view = fast_view(model)
    head = view.get_output_embeddings()
    try:
        base = fast_decoder(model)
    except ExplorerError:  # not a Llama-style decoder: the model's own forward
        def forward(input_ids: torch.Tensor, cache: DynamicCache, n_logits: int) -> torch.Tensor:
            out = view(input_ids=input_ids, past_key_values=cache, use_cache=True, logits_to_keep=n_logits)
            return out.logits[0]  # (n_logits, V)
        return forward

    def forward(input_ids: torch.Tensor, cache: DynamicCache, n_logits: int) -> torch.Tensor:
        hidden = run_layers(base, base.layers, base.embed_tokens(input_ids), cache.get_seq_length(), cache)
        return head(base.norm(hidden[0, -n_logits:]))  # (n_logits, V)

    return forward


def causal_mask(past: int, new: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor | None:
    """Additive (1, 1, new, past + new) mask: query i sees keys 0..past+i. None for one query (it sees
    every cached key); explicit otherwise, since SDPA's own causal flag aligns the diagonal wrongly
    when there is a past."""
    if new == 1:
        return None
    mask = torch.full((new, past + new), torch.finfo(dtype).min, dtype=dtype, device=device)
    return torch.triu(mask, diagonal=past + 1)[None, None]


def run_layers(base, layers, hidden: torch.Tensor, past: int, cache: DynamicCache,
               mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None) -> torch.Tensor:
    """Decoder ``layers`` of a Llama-style ``base`` over T new positions after ``past`` cached ones, with
    the causal mask and rotary embeddings of those positions, or the additive ``mask`` (1, 1, T, past + T)
    and ``position_ids`` (1, T) given (a token tree, ``engine.tree``); (1, T, H) in and out."""
    t = hidden.shape[1]
    causal = position_ids is None  # a plain run of new positions, not a token tree
    if causal:
        position_ids = torch.arange(past, past + t, device=hidden.device)[None]  # (1, T)
        mask = causal_mask(past, t, hidden.dtype, hidden.device)
    rotary = base.rotary_emb(hidden, position_ids=position_ids)
    out = run_compiled(layers, hidden, past, mask, rotary, cache)
    if out is None:  # a GPU's replayed graph (CPU: None); a chain's mask is made inside the graph
        out = cuda_graphs.run(layers, hidden, past, rotary, cache, tree_mask=None if causal else mask)
    if out is not None:
        return out
    for layer in layers:
        hidden = layer(hidden, attention_mask=mask, position_embeddings=rotary, position_ids=position_ids,
                       past_key_values=cache, use_cache=True)
    return hidden


def lm_head(model: torch.nn.Module) -> torch.nn.Module:
    """The model's LM head as a function of final states (…, H) -> (…, V), from its fast view: on the CPU
    in float32 the 49152 × 576 head of the default model is the largest single matmul of a decoding
    step (packed: ≈ 5–7 ms for 1 to 16 rows, against ≈ 14 ms for one row and ≈ 20–27 ms for 2–16
    through MKL on this project's machine)."""
    return fast_view(model).get_output_embeddings()


def decoder_parts(model: torch.nn.Module):
    """The decoder stack of a Llama-style causal LM, or a clear refusal."""
    base = getattr(model, "model", None)
    needed = ("embed_tokens", "layers", "norm", "rotary_emb")
    if base is None or not all(hasattr(base, n) for n in needed) or model.get_output_embeddings() is None:
        raise ExplorerError(
            f"this method runs the model layer by layer (early exit, feature head, BiTA, the low-bit copy): it "
            f"needs a Llama-style decoder (model.model.layers, norm, rotary_emb); "
            f"{type(model).__name__} has another layout: use a 'model:<name>' draft instead"
        )
    kinds = set(getattr(model.config, "layer_types", None) or ["full_attention"])
    if kinds != {"full_attention"}:
        raise ExplorerError(f"methods that run the model layer by layer support full-attention layers only, "
                            f"not {sorted(kinds)}")
    return base


def fast_decoder(model: torch.nn.Module):
    """``decoder_parts`` of the model's fast view (``engine.fast``): what the decode paths run. The
    trainers use ``decoder_parts`` itself (the packed kernel has no gradient)."""
    decoder_parts(model)  # the refusal, on the model itself
    return fast_view(model).model
