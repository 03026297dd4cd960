"""One Llama decoder layer as a pure function of tensors: what the compiled layer (``engine.compiled``)
compiles, and what it is checked against.

Why a pure function: the layer's weights and its KV cache buffers are arguments, so one compiled function
serves every layer of a model (and the early exit's and the feature head's layers of the same shape), and it
can be traced once with symbolic sizes (``engine.compile_child``). The matrix products stay the kernels
``engine.kernels`` chose for this machine: a graph of the oneDNN family takes the packed weights as arguments
and calls oneDNN's op on them; one of the MKL family takes dense weights; the low-bit families call
``engine.lowbit``'s kernels on their codes and scales. A layer whose row buckets chose both MKL and oneDNN runs
one artifact of each. The KV write is an in-place ``index_copy_`` into the cache's buffer
(``engine.cache.GrowingLayer``), fused into the attention's prologue.

This module is part of the compiled artifact's cache key (``compiled.source_key``): an edit here compiles
the layer again; keep here only what the compiled code computes.

Shape legend: T new rows, S cached + new positions, C the cache buffer's capacity, H hidden size,
N query heads, G key/value heads, D head size, I the MLP's inner size.
"""

from __future__ import annotations

import dataclasses
import functools

import torch
import torch.nn.functional as F

from . import lowbit

FAMILY = {"mkl": "mkl", "onednn-1": "onednn", "onednn-8": "onednn"}  # kernel -> the graph that calls it
# tensors each product's weight is passed as, per family: one (dense or packed), or the low-bit kernels' two
# (``engine.lowbit``: codes and their scales); "dense" is a low-bit layer's de-quantised fallback (a plain product)
ARITY = {"mkl": 1, "onednn": 1, "dense": 1, "int4": 2, "int4x8": 2, "int8": 2}


@dataclasses.dataclass(frozen=True)
class LayerShape:
    """What a compiled layer is specialised to (everything else is an argument or a symbolic size)."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    inner: int
    eps: float
    scaling: float
    dtype: str  # "float32" | "bfloat16"
    family: str  # "onednn" (packed weights) | "mkl" or "dense" (dense weights) | "int4" | "int4x8" | "int8" (engine.lowbit)
    bias: bool  # the products add biases
    attention: str = "bmm"  # "bmm" (``attention``) | "rows" (``attention_rows``: a low-bit copy's steps of ≤ 8 rows)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """HF's LlamaRMSNorm in its own order (in float32, back to the input's dtype, then the weight)."""
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def product(family: str, x: torch.Tensor, weight: tuple[torch.Tensor, ...], bias: torch.Tensor | None) -> torch.Tensor:
    """(R, I) -> (R, O): oneDNN's op over a packed weight, the plain (MKL) product over a dense one, or a
    low-bit kernel over its codes and scales (``engine.lowbit``); ``weight`` is the family's tensors."""
    if family == "onednn":
        return torch.ops.mkldnn._linear_pointwise(x, weight[0], bias, "none", [], "")
    if family in ("mkl", "dense"):
        return F.linear(x, weight[0], bias)
    out = lowbit.multiply(family, x, weight)
    return out if bias is None else out + bias


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    """softmax(q kᵀ · scale + mask) v with grouped-query heads, written out: q (N, T, D), k and v (G, S, D),
    mask (T, S) additive -> (T, N·D). Each key/value head's N/G query heads are one (N/G·T)-row product, so
    K and V are never repeated. For the few rows of decoding this is three small kernels; CPU SDPA's flash
    kernel spent ≈ 50–80 µs a call on one row here (scheduling, not arithmetic)."""
    n, t, d = q.shape
    g, s = k.shape[0], k.shape[1]
    scores = torch.bmm(q.reshape(g, (n // g) * t, d), k.transpose(1, 2)) * scale  # (G, N/G·T, S)
    scores = scores.view(g, n // g, t, s) + mask  # mask (T, S) broadcast over the heads
    weights = torch.softmax(scores.float(), dim=-1).to(q.dtype).view(g, (n // g) * t, s)
    out = torch.bmm(weights, v)  # (G, N/G·T, D)
    return out.view(n, t, d).transpose(0, 1).reshape(t, n * d)


def weight_arguments(shape: LayerShape, products, norms, biases=()) -> tuple[torch.Tensor, ...]:
    """``llama_layer``'s weight arguments in order: the four products' tensors (qkv, o, gate_up, down; each
    ``ARITY[family]`` of them), the two norm weights, then the four biases where the shape has them."""
    return tuple(t for p in products for t in p) + tuple(norms) + (tuple(biases) if shape.bias else ())


def attention_rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    """``attention`` for a few rows, written as fused reductions instead of batched products. Why: in bf16
    (a low-bit copy's activations) a batched product over a slice of the KV cache's buffer first copies the
    slice (its batch stride is the buffer's), which cost a one-row step 30–40 µs a layer here; fused, the
    scores, softmax and weighted sum cost less up to 8 rows (measured, compiled, bf16: 1 row over 100 cached
    positions 35 µs against 74; 2 rows over 400, 66 against 121; 8 rows over 400, 143 against 141)."""
    n, t, d = q.shape
    g, s = k.shape[0], k.shape[1]
    rows = q.reshape(g, (n // g) * t, 1, d).float()  # (G, N/G·T, 1, D)
    scores = (rows * k[:, None].float()).sum(-1) * scale  # (G, N/G·T, S)
    scores = scores.view(g, n // g, t, s) + mask  # mask (T, S) broadcast over the heads
    weights = torch.softmax(scores, dim=-1).view(g, (n // g) * t, s, 1)
    out = (weights * v[:, None].float()).sum(-2)  # (G, N/G·T, D)
    return out.to(q.dtype).view(n, t, d).transpose(0, 1).reshape(t, n * d)


def llama_layer(shape: LayerShape, h, k_cache, v_cache, slots, cos, sin, mask, *weights) -> torch.Tensor:
    """One Llama decoder layer over T new rows (HF's ``LlamaDecoderLayer`` with SiLU, batch 1), taking its
    arguments in the shapes the decoder hands a layer, so calling it costs no reshaping in Python.

    h (1, T, H); k_cache, v_cache (1, G, C, D), written in place at ``slots`` (T,) and read at positions
    0..S−1; cos, sin (1, T, D); mask (1, 1, T, S) additive; ``weights`` as ``weight_arguments`` orders
    them: the products in the family's form (packed, dense or low-bit), the norm weights (H,), the biases
    where the shape has them. Returns (1, T, H)."""
    a = ARITY[shape.family]
    qkv, o, gate_up, down = (tuple(weights[i * a:(i + 1) * a]) for i in range(4))
    norm_in, norm_post = weights[4 * a], weights[4 * a + 1]
    qkv_bias, o_bias, gate_up_bias, down_bias = weights[4 * a + 2:4 * a + 6] if shape.bias else (None,) * 4
    t, s = h.shape[1], mask.shape[-1]
    n, g, d, inner = shape.heads, shape.kv_heads, shape.head_dim, shape.inner
    linear = functools.partial(product, shape.family)
    x = rms_norm(h[0], norm_in, shape.eps)  # (T, H)
    q, k, v = linear(x, qkv, qkv_bias).split([n * d, g * d, g * d], dim=-1)
    q = q.view(t, n, d).transpose(0, 1)  # (N, T, D)
    k = k.view(t, g, d).transpose(0, 1)  # (G, T, D)
    v = v.view(t, g, d).transpose(0, 1)  # (G, T, D)
    q = q * cos + rotate_half(q) * sin  # cos, sin (1, T, D) broadcast over the heads
    k = k * cos + rotate_half(k) * sin
    # written into the argument itself (a write through a view of it makes inductor copy the whole buffer)
    k_cache.index_copy_(2, slots, k[None])
    v_cache.index_copy_(2, slots, v[None])
    attend = attention_rows if shape.attention == "rows" else attention
    a = attend(q, k_cache[0, :, :s], v_cache[0, :, :s], mask[0, 0], shape.scaling)  # (T, N·D)
    hidden = h[0] + linear(a, o, o_bias)  # (T, H)
    x = rms_norm(hidden, norm_post, shape.eps)
    gate, up = linear(x, gate_up, gate_up_bias).split([inner, inner], dim=-1)
    return (hidden + linear(F.silu(gate) * up, down, down_bias))[None]  # (1, T, H)
