"""The 4-bit blocks a GGUF file stores, as the loaded model's weights: what the default model *is* before
``transformers`` de-quantises it (``models.default``).

The default's GGUF keeps every linear of its 30 layers as llama.cpp's Q4_1: blocks of 32 weights along a
row, each 20 bytes — an fp16 scale d, an fp16 minimum m, then 16 bytes of 4-bit codes (byte j holds code j
in its low nibble and code j + 16 in its high one) — standing for w = d·q + m. ``q4_1_blocks`` reads them
into ``engine.lowbit.Int4Blocks`` named as the model's own parameters, so a 4-bit copy of the model uses
the file's codes and not a new rounding of its float weights.

Pitfall (``transformers``' ``_reverse_permute_weights``): the GGUF keeps Llama's rotary row order for
``attn_q`` and ``attn_k``, which ``transformers`` undoes on load (rows grouped per head as (dim/2, 2),
the two axes swapped); the blocks' rows are permuted the same way here before they are paired with the
loaded model's rows.

Shape legend: O output rows, G blocks per row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..engine.lowbit import GROUP, Int4Blocks

BLOCK_BYTES = 4 + GROUP // 2  # d, m (fp16 each) and 16 bytes of codes
# GGUF tensor name part -> the Llama parameter it is (model.layers.{i}.<this>.weight)
LLAMA_NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
               "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
               "ffn_down": "mlp.down_proj"}


def q4_1_blocks(path: Path, config) -> dict[str, Int4Blocks]:
    """Every Q4_1 tensor of a Llama GGUF as ``Int4Blocks``, keyed by the loaded model's parameter name
    (``model.layers.3.mlp.up_proj.weight``); q and k rows in the loaded model's order (see the module)."""
    from gguf import GGUFReader

    heads = {"attn_q": config.num_attention_heads,
             "attn_k": getattr(config, "num_key_value_heads", None) or config.num_attention_heads}
    blocks = {}
    for tensor in GGUFReader(str(path)).tensors:
        parts = tensor.name.split(".")  # blk.{i}.{kind}.weight
        if tensor.tensor_type.name != "Q4_1" or len(parts) != 4 or parts[0] != "blk" or parts[2] not in LLAMA_NAMES:
            continue
        codes, scale, minimum = _unpack(np.asarray(tensor.data))
        if parts[2] in heads:
            codes, scale, minimum = (_reverse_permute(a, heads[parts[2]]) for a in (codes, scale, minimum))
        blocks[f"model.layers.{parts[1]}.{LLAMA_NAMES[parts[2]]}.weight"] = Int4Blocks(
            torch.from_numpy(np.ascontiguousarray(codes)), torch.from_numpy(np.ascontiguousarray(scale)),
            torch.from_numpy(np.ascontiguousarray(minimum)))
    return blocks


def _unpack(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q4_1 bytes (O, G·20) -> codes (O, G·32) uint8, d and m (O, G) float32."""
    rows = raw.shape[0]
    b = raw.reshape(rows, -1, BLOCK_BYTES)  # (O, G, 20)
    d = b[:, :, 0:2].copy().view(np.float16)[..., 0].astype(np.float32)  # (O, G)
    m = b[:, :, 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    packed = b[:, :, 4:]  # (O, G, 16)
    codes = np.concatenate([packed & 0xF, packed >> 4], axis=-1).reshape(rows, -1)  # (O, G·32)
    return codes, d, m


def _reverse_permute(a: np.ndarray, heads: int) -> np.ndarray:
    """``transformers``' reverse permutation of q/k rows (per head, (dim/2, 2) → (2, dim/2))."""
    half = a.shape[0] // heads // 2
    return a.reshape(heads, half, 2, *a.shape[1:]).swapaxes(2, 1).reshape(a.shape)
