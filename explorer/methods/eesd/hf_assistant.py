"""Our ``early-exit:N`` as Hugging Face's assisted generation takes a draft (``assistant_model``): the benchmark's
baseline for EESD (``explorer.hf_systems``), reached through the draft kind's ``hf_assistant``.
"""

from __future__ import annotations

import torch

from .exits import exit_for


def early_exit_assistant(model: torch.nn.Module, n_layers: int) -> torch.nn.Module:
    """A model object made of the target's own embedding, first N layers, the same trained exit layers
    and norm as our ``early-exit:N`` when one ships (else the model's norm), and the full LM head
    (shared tensors, the target untouched): what HF's ``assistant_model`` needs. HF runs it with its
    own cache (no sharing with the target) and over the whole vocabulary."""
    import copy

    head = exit_for(model, n_layers)
    layers = list(model.model.layers[:n_layers])
    for index, layer in enumerate(head.layers):
        # shallow copies share the weights; only the attention's cache index differs (HF's cache is one
        # list of layers), and the submodule table is copied so the original keeps its own attention
        exit_layer = copy.copy(layer)
        exit_layer._modules = dict(layer._modules)
        attention = copy.copy(layer.self_attn)
        attention.layer_idx = n_layers + index
        exit_layer.self_attn = attention
        layers.append(exit_layer)
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = len(layers)
    if getattr(config, "layer_types", None):
        config.layer_types = config.layer_types[:len(layers)]
    with torch.device("meta"):
        assistant = type(model)(config)
    assistant.model.embed_tokens = model.model.embed_tokens
    assistant.model.layers = torch.nn.ModuleList(layers)
    assistant.model.norm = head.norm
    assistant.model.rotary_emb = model.model.rotary_emb
    assistant.lm_head = model.lm_head
    assistant.generation_config = copy.deepcopy(model.generation_config)
    return assistant.eval()


def hf_assistant(model: torch.nn.Module, argument: str) -> torch.nn.Module:
    """``DraftKind.hf_assistant`` of ``early-exit:N``: ``argument`` is N."""
    return early_exit_assistant(model, int(argument))
