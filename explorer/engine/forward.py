"""Forward functions over a shared, read-only model, and the decoder parts an early-exit draft uses.

``full_forward`` is the whole causal LM, with the LM head from ``lm_head`` (below). ``decoder_parts`` hands the Llama-style decoder stack
(embedding, layers, norm, rotary embedding) to ``engine.self_draft``, which runs the first N layers as
the draft and the rest as verification over one cache (EESD 3.1); the model is never patched or copied.

Shape legend: V vocabulary.
"""

from __future__ import annotations

import weakref

import torch
from transformers import DynamicCache

from ..errors import ExplorerError

_PACKED: "weakref.WeakKeyDictionary[torch.nn.Module, object]" = weakref.WeakKeyDictionary()


def full_forward(model: torch.nn.Module):
    """The whole causal LM; only the last ``n_logits`` positions go through the LM head."""
    base, head = getattr(model, "model", None), lm_head(model)
    if base is None or not hasattr(base, "layers"):
        def forward(input_ids: torch.Tensor, cache: DynamicCache, n_logits: int) -> torch.Tensor:
            out = model(input_ids=input_ids, past_key_values=cache, use_cache=True, logits_to_keep=n_logits)
            return out.logits[0]  # (n_logits, V)
        return forward

    def forward(input_ids: torch.Tensor, cache: DynamicCache, n_logits: int) -> torch.Tensor:
        hidden = base(input_ids=input_ids, past_key_values=cache, use_cache=True).last_hidden_state
        return head(hidden[0, -n_logits:])  # (n_logits, V)

    return forward


def lm_head(model: torch.nn.Module):
    """The model's LM head as a function of final states (…, H) -> (…, V).

    On the CPU in float32 the head's weight is reordered once into oneDNN's blocked layout (kept per
    model, +V·H·4 bytes): the 49152 × 576 head of the default model then takes ≈ 5.8 ms for one row and
    ≈ 12 ms for 2–8 rows, against ≈ 10.9 ms and ≈ 24 ms through the plain MKL matmul on this project's
    2-core machine — the largest single matmul of a decoding step, and the one a verification of several
    tokens pays most for. Elsewhere (CUDA, other dtypes, a torch without the op) it is the module itself.
    """
    module = model.get_output_embeddings()
    weight = getattr(module, "weight", None)
    if (weight is None or weight.device.type != "cpu" or weight.dtype != torch.float32
            or getattr(module, "bias", None) is not None or not _onednn_linear_available()):
        return module
    packed = _PACKED.get(model)
    if packed is None or packed[0] is not weight:
        with torch.no_grad():
            packed = (weight, torch.ops.mkldnn._reorder_linear_weight(weight.detach(), 1))
        _PACKED[model] = packed
    reordered = packed[1]

    def head(hidden: torch.Tensor) -> torch.Tensor:
        flat = hidden.reshape(-1, hidden.shape[-1]).contiguous()
        out = torch.ops.mkldnn._linear_pointwise(flat, reordered, None, "none", [], "")
        return out.reshape(*hidden.shape[:-1], out.shape[-1])

    return head


def _onednn_linear_available() -> bool:
    try:
        return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise") \
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    except (AttributeError, RuntimeError):
        return False


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
