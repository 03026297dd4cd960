"""Hugging Face's own decoding as the benchmark's and the sweeps' baselines: ``generate`` (plain, or assisted by
prompt lookup or by an assistant made of the target's own first layers and our trained exit), and its beam search,
each timed around the whole call, as ours are.
"""

from __future__ import annotations

import time

import torch

from .methods.eesd.exits import exit_for


def hf_assistant_kwargs(target, draft: str, gamma: int) -> dict:
    """Hugging Face's own assisted generation with the same draft as ours (``prompt-lookup:n`` or
    ``early-exit:N``), at a constant γ: ``generate``'s keywords."""
    kind, _, arg = draft.partition(":")
    if kind == "prompt-lookup":
        return {"prompt_lookup_num_tokens": gamma, "max_matching_ngram_size": int(arg)}
    return {"assistant_model": early_exit_assistant(target.model, int(arg)),
            "num_assistant_tokens": gamma, "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": 0.0}


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


def hf_beam_search(target, prompt_ids: list[int], width: int, max_new_tokens: int) -> tuple[list[int], float]:
    """Hugging Face's beam search on the target (``generate(num_beams=k, do_sample=False)``, length penalty
    1, ``early_stopping=False``): the best beam's new tokens (to its end-of-sequence token) and seconds."""
    x = torch.tensor([prompt_ids], device=target.device)
    start = time.perf_counter()
    with torch.inference_mode():
        out = target.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens, num_beams=width,
                                    do_sample=False, length_penalty=1.0, early_stopping=False,
                                    pad_token_id=min(target.eos_token_ids, default=0))
    seconds = time.perf_counter() - start
    ids = out[0, len(prompt_ids):].tolist()
    end = next((i for i, t in enumerate(ids) if t in target.eos_token_ids), None)
    return (ids if end is None else ids[: end + 1]), seconds


def hf_generate(target, prompt_ids: list[int], n: int, temperature: float, **assist) -> tuple[list[int], float, None]:
    """Hugging Face's ``generate`` on the target (greedy at temperature 0, else sampling with no top-k), assisted
    where ``assist`` says: the new tokens, the seconds, and no trace."""
    x = torch.tensor([prompt_ids], device=target.device)
    kwargs = dict(do_sample=True, temperature=temperature, top_k=0) if temperature > 0 else dict(do_sample=False)
    start = time.perf_counter()
    with torch.inference_mode():
        out = target.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n,
                                    pad_token_id=min(target.eos_token_ids, default=0), **kwargs, **assist)
    if target.device.type == "cuda":
        torch.cuda.synchronize(target.device)
    return out[0, len(prompt_ids):].tolist(), time.perf_counter() - start, None
