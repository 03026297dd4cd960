"""The 4-bit blocks a GGUF file stores, as the loaded model's weights: what the default model *is* before
``transformers`` de-quantises it (``models.default``).

The default's GGUF keeps every linear of its 30 layers as llama.cpp's Q4_1: blocks of 32 weights along a
row, each 20 bytes — an fp16 scale d, an fp16 minimum m, then 16 bytes of 4-bit codes (byte j holds code j
in its low nibble and code j + 16 in its high one) — standing for w = d·q + m. ``q4_1_blocks`` reads them
into ``engine.lowbit.Int4Blocks`` named as the model's own parameters, so a 4-bit copy of the model uses
the file's codes and not a new rounding of its float weights. ``q4_1_tensors`` reads the file itself, only as
far as the blocks need (``gguf.GGUFReader`` builds every key-value pair first: 17× slower here).

Pitfall (``transformers``' ``_reverse_permute_weights``): the GGUF keeps Llama's rotary row order for
``attn_q`` and ``attn_k``, which ``transformers`` undoes on load (rows grouped per head as (dim/2, 2),
the two axes swapped); the blocks' rows are permuted the same way here before they are paired with the
loaded model's rows.

Shape legend: O output rows, G blocks per row.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Iterator, NamedTuple

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
    heads = {"attn_q": config.num_attention_heads,
             "attn_k": getattr(config, "num_key_value_heads", None) or config.num_attention_heads}
    blocks = {}
    for tensor in q4_1_tensors(path):
        parts = tensor.name.split(".")  # blk.{i}.{kind}.weight
        if len(parts) != 4 or parts[0] != "blk" or parts[2] not in LLAMA_NAMES:
            continue
        codes, scale, minimum = _unpack(tensor.raw)
        if parts[2] in heads:
            codes, scale, minimum = (_reverse_permute(a, heads[parts[2]]) for a in (codes, scale, minimum))
        blocks[f"model.layers.{parts[1]}.{LLAMA_NAMES[parts[2]]}.weight"] = Int4Blocks(
            torch.from_numpy(np.ascontiguousarray(codes)), torch.from_numpy(np.ascontiguousarray(scale)),
            torch.from_numpy(np.ascontiguousarray(minimum)))
    return blocks


# -- the file: only what the blocks need ---------------------------------------------------------------
# GGUF v2/v3 (ggml's docs/gguf.md): a header, key-value pairs, tensor infos, then the tensors' data, aligned.
# ``gguf.GGUFReader`` builds every key-value pair as numpy views, and the default's tokenizer (49 152 tokens and
# 48 900 merges, each a string) took 2.7 s of the 3.4 s the blocks took to read here; this skips them, and the
# blocks read in 0.2 s (the first ``quantized`` run of every process, the page's headline, waited for them).

GGUF_MAGIC = struct.unpack("<I", b"GGUF")[0]
Q4_1 = 3  # ggml_type
ALIGNMENT = 32  # unless general.alignment says otherwise
# a key-value pair's value type -> its size in bytes (8: a string, 9: an array, read apart)
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Q41Tensor(NamedTuple):
    name: str
    raw: np.ndarray  # (O, G·20) uint8: each row's blocks


def q4_1_tensors(path: Path) -> Iterator[Q41Tensor]:
    """Every Q4_1 tensor of a little-endian GGUF file (v2 or v3), its rows' raw blocks in file order."""
    try:
        data = np.memmap(path, dtype=np.uint8, mode="r")  # an empty file: ValueError
        infos, start = _tensor_infos(_Header(data))
    except (struct.error, UnicodeDecodeError, ValueError) as err:  # a cut or foreign file
        raise ValueError(f"{Path(path).name} is not a whole little-endian GGUF file of version 2 or 3 ({err})") from None
    for name, shape, kind, offset in infos:
        if kind != Q4_1 or len(shape) != 2 or shape[0] % GROUP:
            continue
        row_bytes = shape[0] // GROUP * BLOCK_BYTES
        begin = start + offset
        raw = np.asarray(data[begin:begin + shape[1] * row_bytes])
        if raw.size != shape[1] * row_bytes:
            raise ValueError(f"{Path(path).name} ends inside its tensor {name}")
        yield Q41Tensor(name, raw.reshape(shape[1], row_bytes))


def _tensor_infos(reader: "_Header") -> tuple[list[tuple[str, list[int], int, int]], int]:
    """The tensor infos (name, shape in ggml's order, ggml type, offset) and where their data starts."""
    if reader.u32() != GGUF_MAGIC or reader.u32() not in (2, 3):
        raise ValueError("no GGUF magic and version")
    n_tensors, n_pairs = reader.u64(), reader.u64()
    alignment = ALIGNMENT
    for _ in range(n_pairs):
        key, kind = reader.string(), reader.u32()
        if key == "general.alignment" and kind == 4:
            alignment = reader.u32()
        else:
            reader.skip_value(kind)
    infos = []
    for _ in range(n_tensors):
        name, dims = reader.string(), reader.u32()
        shape = [reader.u64() for _ in range(dims)]  # ggml's order: the row length first
        infos.append((name, shape, reader.u32(), reader.u64()))
    return infos, -(-reader.at // alignment) * alignment


class _Header:
    """Little-endian reads from the start of a GGUF file, in order."""

    def __init__(self, data: np.ndarray):
        self.data, self.at = memoryview(data), 0

    def _take(self, fmt: str):
        value = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += struct.calcsize(fmt)
        return value

    def u32(self) -> int:
        return self._take("<I")

    def u64(self) -> int:
        return self._take("<Q")

    def string(self) -> str:
        n = self.u64()
        text = bytes(self.data[self.at:self.at + n]).decode("utf-8")
        self.at += n
        return text

    def skip_value(self, kind: int) -> None:
        if kind in FIXED:
            self.at += FIXED[kind]
        elif kind == 8:
            n = self.u64()  # read first: ``self.at += self.u64()`` would add to the position before the length
            self.at += n
        elif kind == 9:
            item, count = self.u32(), self.u64()
            if item in FIXED:
                self.at += FIXED[item] * count
            else:
                for _ in range(count):
                    self.skip_value(item)
        else:
            raise ValueError(f"a GGUF value of unknown type {kind}")


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
