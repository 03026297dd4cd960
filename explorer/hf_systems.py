"""Hugging Face's own decoding as the benchmark's and the sweeps' baselines: ``generate`` (plain, or assisted by
prompt lookup or by the assistant model a draft kind builds, ``DraftKind.hf_assistant``: the target's own first
layers and our trained exit for ``early-exit:N``), and its beam search, each timed around the whole call, as ours are.
"""

from __future__ import annotations

import time

import torch

from .drafts import KINDS, draft_kind
from .errors import ExplorerError
from .limits import clip


def hf_assistant_kwargs(target, draft: str, gamma: int) -> dict:
    """Hugging Face's own assisted generation with the same draft as ours (``prompt-lookup:n``, or a draft kind
    that builds HF an assistant model, ``DraftKind.hf_assistant``: ``early-exit:N``), at a constant γ:
    ``generate``'s keywords."""
    kind, _, arg = draft.partition(":")
    if kind == "prompt-lookup":
        return {"prompt_lookup_num_tokens": gamma, "max_matching_ngram_size": int(arg)}
    registered = KINDS.get(draft_kind(draft))
    if registered is None or registered.hf_assistant is None:
        raise ExplorerError(f"Hugging Face's assisted generation has no counterpart of the draft {clip(draft, 60)}")
    return {"assistant_model": registered.hf_assistant(target.model, arg),
            "num_assistant_tokens": gamma, "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": 0.0}


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
