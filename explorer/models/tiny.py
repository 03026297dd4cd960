"""Tiny random models for tests: ``tiny-random[:SEED[:LAYERS]]``, a small Llama over ``CharTokenizer``'s
32 characters, built deterministically in memory."""

from __future__ import annotations

import torch

from .. import limits
from ..errors import ModelLoadError
from .loaded import CharTokenizer


def _build_tiny_random(spec: str, dtype: torch.dtype):
    """``tiny-random[:SEED[:LAYERS]]``: a 32-token Llama (hidden 32) built deterministically in memory.

    The weights are drawn with a large init scale (0.3) so that the distributions are peaked and two
    seeds disagree a lot: the hard case for the lossless sampling tests.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    parts = spec.split(":")[1:]
    try:
        seed = int(parts[0]) if parts else 0
        layers = int(parts[1]) if len(parts) > 1 else 2
        if len(parts) > 2 or not 0 <= seed < 2**63 or not 1 <= layers <= 16:  # torch takes 64-bit seeds
            raise ValueError
    except ValueError:
        raise ModelLoadError(
            f"bad tiny-random spec {limits.clip(spec, 60)}: write tiny-random[:SEED[:LAYERS]] with 0 <= SEED < 2^63, "
            "1 <= LAYERS <= 16"
        ) from None
    config = LlamaConfig(
        vocab_size=len(CharTokenizer.ALPHABET), hidden_size=32, intermediate_size=64,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=1024, initializer_range=0.3, tie_word_embeddings=False,
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.to(dtype), CharTokenizer()
