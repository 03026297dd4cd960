"""Forward functions over a shared, read-only model: the whole model, or a view of its first layers.

The early-exit view runs the target's own embedding and first N decoder layers, then optional exit
layers (EESD section 3.1: one trained transformer layer) and a norm + LM head. It mirrors
``LlamaModel.forward`` (``transformers`` 5.x) but stops early; the target model is never patched or
copied. Decoder layers write their KV under their own ``layer_idx``, so the view's cache holds exactly the
first N layers' entries — the same tensors the target computes for those layers, which is the seam for
sharing them with the target (EESD 3.1).

Shape legend: T new tokens, H hidden size, V vocabulary.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.masking_utils import create_causal_mask

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


class EarlyExitForward:
    """The first ``n_layers`` decoder layers of ``model``, then ``exit_layers``, ``exit_norm`` and the head.

    Untrained (the default): no exit layers, the model's own final norm and LM head.
    """

    def __init__(self, model: torch.nn.Module, n_layers: int, exit_layers=(), exit_norm=None):
        self.base = decoder_parts(model)
        total = len(self.base.layers)
        if not 1 <= n_layers < total:
            raise ExplorerError(f"early-exit:N needs 1 <= N < {total} (the model has {total} layers), got {n_layers}")
        self.model = model
        self.layers = list(self.base.layers[:n_layers]) + list(exit_layers)
        self.norm = exit_norm if exit_norm is not None else self.base.norm
        self.head = model.get_output_embeddings()

    def __call__(self, input_ids: torch.Tensor, cache: DynamicCache, n_logits: int) -> torch.Tensor:
        hidden = self.base.embed_tokens(input_ids)  # (1, T, H)
        past = cache.get_seq_length()
        position_ids = torch.arange(past, past + input_ids.shape[1], device=input_ids.device)[None]  # (1, T)
        mask = create_causal_mask(config=self.base.config, inputs_embeds=hidden, attention_mask=None,
                                  past_key_values=cache, position_ids=position_ids)
        rotary = self.base.rotary_emb(hidden, position_ids=position_ids)
        for layer in self.layers:
            hidden = layer(hidden, attention_mask=mask, position_embeddings=rotary, position_ids=position_ids,
                           past_key_values=cache, use_cache=True)
        hidden = self.norm(hidden[:, -n_logits:])  # (1, n_logits, H)
        return self.head(hidden)[0]  # (n_logits, V)
