"""Batched generation for self-distillation data, on the engine's fast path.

The trainers need the target's own answers to thousands of prompts (EESD 3.2). Hugging Face ``generate``
runs the model as loaded (MKL's GEMMs, a cache copied by ``torch.cat`` every step) and keeps finished rows
in the batch; here the same model runs on its fast view (``engine.fast``: linears packed for oneDNN, fused
layers, a KV cache that grows in place), and a row leaves the batch when it ends. On this project's 2-core
CPU, 48 prompts × 128 tokens: 400–450 tokens/s against 143 for ``generate`` (greedy answers identical
to ``generate``'s on the prompts compared).

Rows are left-padded: a padding position is never attended to, and each row's positions count from its
own first token, so a row decodes as it would alone (up to float rounding of batched matmuls).

Sampling: temperature, then top-p over the 1024 most likely tokens — exact whenever those hold at least
``top_p`` of the mass (always, at temperature ≤ 1 on the default model); a row where they do not is
warped over the whole vocabulary (``engine.sampling.warp``).

Shape legend: B batch rows, W prompt width, S cached positions, H hidden size, V vocabulary, C candidates.
"""

from __future__ import annotations

import torch

from ..engine.cache import new_cache
from ..engine.forward import fast_decoder, lm_head
from ..engine.sampling import SamplingConfig, warp

CANDIDATES = 1024  # top-p is decided among these (C); see the module docstring


@torch.no_grad()
def generate_batch(target, prompts: list[tuple[int, ...]], mode: str, max_new_tokens: int, seed: int,
                   temperature: float = 0.8, top_p: float = 0.95) -> list[tuple[int, ...]]:
    """The target's answers to ``prompts`` (token ids), each cut after its first end-of-sequence token.

    ``mode``: "greedy" (argmax) or "sample" (temperature + top-p, seeded by ``seed``)."""
    base, head = fast_decoder(target.model), lm_head(target.model)
    eos = target.eos_token_ids
    pad = min(eos) if eos else 0
    device = target.device
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], device=device)  # (B, W)
    valid = torch.tensor([[False] * (width - len(p)) + [True] * len(p) for p in prompts], device=device)  # (B, W)
    positions = (valid.long().cumsum(1) - 1).clamp(min=0)  # (B, W): each row counts from its first token
    generator = torch.Generator(device=device).manual_seed(seed)
    cache = new_cache()

    # the prompts: causal within a row, padding keys closed (a padding query sees itself: no empty row)
    causal = torch.ones(width, width, dtype=torch.bool, device=device).tril()  # (W, W)
    seen = (causal[None] & valid[:, None, :]) | torch.eye(width, dtype=torch.bool, device=device)[None]  # (B, W, W)
    hidden = _layers(base, base.embed_tokens(ids), _additive(seen[:, None], base), positions, cache)
    logits = head(base.norm(hidden[:, -1]))  # (B, V)

    rows = list(range(len(prompts)))  # which prompt each batch row answers
    answers: list[list[int]] = [[] for _ in prompts]
    keys_valid, next_position = valid, positions[:, -1] + 1  # (B, S), (B,)
    for _ in range(max_new_tokens):
        tokens = _choose(logits, mode, temperature, top_p, generator)  # (B,)
        keep = []
        for row, (prompt, token) in enumerate(zip(rows, tokens.tolist())):
            answers[prompt].append(token)
            if token not in eos and len(answers[prompt]) < max_new_tokens:
                keep.append(row)
        if not keep:
            break
        if len(keep) < len(rows):  # finished rows leave the batch and the cache
            index = torch.tensor(keep, device=device)
            rows = [rows[r] for r in keep]
            tokens, keys_valid, next_position = tokens[index], keys_valid[index], next_position[index]
            for layer in cache.layers:
                layer.keys, layer.values = layer.keys[index], layer.values[index]
        keys_valid = torch.cat([keys_valid, keys_valid.new_ones(len(rows), 1)], dim=1)  # (B, S)
        hidden = _layers(base, base.embed_tokens(tokens[:, None]), _additive(keys_valid[:, None, None], base),
                         next_position[:, None], cache)
        logits = head(base.norm(hidden[:, -1]))  # (B, V)
        next_position = next_position + 1
    return [tuple(a) for a in answers]


def _layers(base, hidden: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache) -> torch.Tensor:
    """Every decoder layer over (B, T, H) with an additive mask and per-row positions (B, T)."""
    rotary = base.rotary_emb(hidden, position_ids=positions)
    for layer in base.layers:
        hidden = layer(hidden, attention_mask=mask, position_embeddings=rotary, position_ids=positions,
                       past_key_values=cache, use_cache=True)
    return hidden


def _additive(allowed: torch.Tensor, base) -> torch.Tensor:
    """A boolean mask as an additive one in the model's dtype (0 where attending, the minimum where not)."""
    dtype = base.embed_tokens.weight.dtype
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


def _choose(logits: torch.Tensor, mode: str, temperature: float, top_p: float,
            generator: torch.Generator) -> torch.Tensor:
    """Next tokens (B,) from logits (B, V): the argmax, or a temperature + top-p draw."""
    if mode == "greedy":
        return logits.argmax(dim=-1)
    scaled = logits.float() / temperature
    top, index = scaled.topk(min(CANDIDATES, scaled.shape[-1]), dim=-1)  # (B, C), most likely first
    mass = (top.logsumexp(-1) - scaled.logsumexp(-1)).exp()  # (B,): the candidates' share of the mass
    probs = top.softmax(dim=-1)  # (B, C)
    probs = probs.masked_fill(probs.cumsum(-1) - probs >= top_p / mass[:, None], 0.0)
    tokens = index.gather(1, torch.multinomial(probs, 1, generator=generator))[:, 0]  # (B,)
    short = (mass < top_p).nonzero().flatten().tolist()  # rows whose nucleus reaches past the candidates
    if short:
        full = warp(logits[short], SamplingConfig(temperature=temperature, top_p=top_p))  # (b, V)
        tokens[short] = torch.multinomial(full, 1, generator=generator)[:, 0]
    return tokens
