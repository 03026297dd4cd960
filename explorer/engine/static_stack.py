"""The arithmetic a CUDA graph records (``engine.cuda_graphs``): a stack of Llama decoder layers over T new rows,
their keys and values written into static buffers at the rows' positions and the whole buffer attended under a
mask, in fewer kernels than the model's own forward, since on a GPU such a forward costs its kernels:
- a plain layer's q/k/v products run as one and its gate/up products as one (``Joined``: copies of the weights,
  remade when one changes, each remaking counted in ``generation()`` so that graphs of the old copies are not
  replayed);
- float32 norms in one ``F.rms_norm``;
- queries and keys turned by their rotary angles together, ``x·cos + roll(x, D/2)·signed_sin``;
- the score scale and mask inside the score product (``baddbmm``), the weighted sum split over the buffer;
- residuals added inside the o and down products (``split_products.product``'s ``residual``).
Off CUDA the same stack runs eagerly for the tests (``cuda_graphs.static_on_cpu``).

Shape legend: T new rows, C buffer capacity, H hidden size, N query heads, G key/value heads, D head size,
R = N/G · T query rows a key/value head serves.
"""

from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F

from .fused_layer import FusedLlamaLayer
from .split_products import product

SPLITS = 16  # chunks of the KV buffer the attention's weighted sum is split into (``whole_buffer_attention``)
_JOINED: "weakref.WeakKeyDictionary[torch.nn.Module, Joined]" = weakref.WeakKeyDictionary()
_REMADE = [0]  # joined products remade after a weight changed in place (``generation``)


def generation() -> int:
    """How many times joined products were remade: part of a graph's key, so none of the old copies replays."""
    return _REMADE[0]


def products(layer) -> tuple:
    """A layer's product modules, in the order ``_layer`` runs them: 4 (q/k/v, o, gate/up, down)."""
    if isinstance(layer, FusedLlamaLayer):
        return layer.qkv, layer.o_proj, layer.gate_up, layer.down_proj
    parts = joined(layer)
    return parts.qkv, layer.self_attn.o_proj, parts.gate_up, layer.mlp.down_proj


class Dense(torch.nn.Module):
    """x Wᵀ (+ b) over a weight of its own; ``split_products`` reads it as it reads the fast view's linears."""

    def __init__(self, linears):
        super().__init__()
        with torch.no_grad():
            self.dense = torch.cat([m.weight.detach() for m in linears])  # (ΣO, I)
            self.bias_tensor = None if linears[0].bias is None else torch.cat([m.bias.detach() for m in linears])
        self.out_features = self.dense.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.dense, self.bias_tensor)


class Joined:
    """A plain Llama layer's q/k/v products as one and its gate/up products as one (what ``FusedLlamaLayer``
    does on the CPU): 4 products a layer instead of 7, and with them 3 fewer kernels a layer (more where a
    product is split), in a forward whose cost is its kernels. Copies of the weights, made once per layer
    and remade if a weight changes in place; the model itself is never changed."""

    def __init__(self, layer):
        attn, mlp = layer.self_attn, layer.mlp
        self.sources = [(m.weight, m.weight._version) for m in
                        (attn.q_proj, attn.k_proj, attn.v_proj, mlp.gate_proj, mlp.up_proj)]
        self.qkv = Dense([attn.q_proj, attn.k_proj, attn.v_proj])
        self.gate_up = Dense([mlp.gate_proj, mlp.up_proj])
        self.q_size, self.kv_size, self.inner = attn.q_proj.out_features, attn.k_proj.out_features, \
            mlp.gate_proj.out_features

    def fresh(self) -> bool:
        return all(weight._version == version for weight, version in self.sources)


def joined(layer) -> Joined:
    """``layer``'s joined products; a weight changed since they were made remakes them (a graph reads the copies,
    not the model's weights: ``generation`` tells the graphs)."""
    parts = _JOINED.get(layer)
    if parts is None or not parts.fresh():
        if parts is not None:
            _REMADE[0] += 1
        parts = _JOINED[layer] = Joined(layer)
    return parts


def _heads_per_group(layer) -> int:
    """Query heads per key/value head (N/G) of ``layer``."""
    return layer.groups if isinstance(layer, FusedLlamaLayer) else layer.self_attn.num_key_value_groups


def kv_shape(layer) -> tuple[int, int]:
    """(G, D): key/value heads and head size of ``layer``."""
    if isinstance(layer, FusedLlamaLayer):
        return layer.kv_size // layer.head_dim, layer.head_dim
    attn = layer.self_attn
    return attn.k_proj.out_features // attn.head_dim, attn.head_dim


def stack(layers, buffers, hidden, cos, sin, slots, mask=None) -> torch.Tensor:
    """The stack over static buffers: what a graph records. A chain's row i sits at position slots[i] and sees
    every key at or before it (the cached context and the rows before it), the rest of the buffer masked; a
    tree's rows see what its ``mask`` (T, C) lets them."""
    if mask is None:
        columns = torch.arange(buffers[0][0].shape[2], device=hidden.device)  # (C,)
        low = torch.finfo(hidden.dtype).min
        mask = torch.where(columns[None, :] <= slots[:, None], 0.0, low).to(hidden.dtype)  # (T, C) additive
    mask = group_rows(mask, _heads_per_group(layers[0]))  # (R, C), once for every layer
    half = cos.shape[-1] // 2
    signed_sin = torch.cat([-sin[0, :, :half], sin[0, :, half:]], dim=-1)  # (T, D): rotate_half's sign, once
    hidden = hidden.clone()  # the layers add their residuals in place; the caller's rows stay as they were
    for layer, (keys, values) in zip(layers, buffers):
        hidden = _layer(layer, hidden, keys, values, slots, cos[0], signed_sin, mask)
    return hidden


def group_rows(mask: torch.Tensor, heads_per_group: int) -> torch.Tensor:
    """An additive mask (T, C) as a key/value head's query rows see it, (R, C): row h·T + t is head h's row t."""
    return mask.repeat(heads_per_group, 1)


def whole_buffer_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                           scale: float) -> torch.Tensor:
    """softmax(q kᵀ · scale + mask) v over a whole KV buffer, grouped-query heads: q (N, T, D), k and v (G, C, D),
    mask additive, as ``group_rows`` gives it (R, C) -> (T, N·D), as ``layer_maths.attention`` but with the
    weighted sum over the C positions split into ``SPLITS`` chunks that are summed after (flash-decoding's split
    of the keys). Why: the sum is a product of a few rows by C = 1 024 positions, which a GPU's product kernel
    walks in one tile's serial loop: 36 µs a layer, a third of a graphed one-row forward's kernel time (H100,
    float32, 2026-11-27, ``tools/gpu_profile.py``); split, the chunks run side by side."""
    n, t, d = q.shape
    g, c = k.shape[0], k.shape[1]
    rows = (n // g) * t  # each key/value head's query rows: N/G heads × T
    scores = torch.baddbmm(mask, q.reshape(g, rows, d), k.transpose(1, 2), alpha=scale)  # scaled, masked: one kernel
    weights = torch.softmax(scores.float(), dim=-1).to(q.dtype)  # (G, R, C)
    splits = SPLITS if c % SPLITS == 0 else 1
    chunk = c // splits
    weights = weights.view(g, rows, splits, chunk).transpose(1, 2).reshape(g * splits, rows, chunk)
    parts = torch.bmm(weights, v.reshape(g * splits, chunk, d))  # (G·P, R, D): one chunk's share each
    out = parts.view(g, splits, rows, d).sum(1)  # (G, R, D)
    return out.view(n, t, d).transpose(0, 1).reshape(t, n * d)


def _layer(layer, h, keys, values, slots, cos, signed_sin, mask) -> torch.Tensor:
    """One Llama decoder layer over (1, T, H), its keys and values written at ``slots`` of the buffers
    (1, G, C, D) and attended over all C positions under ``mask`` (R, C); cos (T, D), signed_sin (T, D) the sine
    with its first half negated. Fewer kernels than the model's own forward, the same function:
    - the queries and keys turn together (side by side in the q/k/v product's output), and HF's
      ``x·cos + rotate_half(x)·sin`` is ``x·cos + roll(x, D/2)·signed_sin`` (a sign moved, nothing rounded
      differently): 3 kernels for both instead of 5 for each;
    - the residuals are added inside the o and down products (``split_products.product``'s ``residual``),
      in place: ``h`` is the stack's own tensor."""
    t = h.shape[1]
    if isinstance(layer, FusedLlamaLayer):
        d, scaling, out_proj, parts = layer.head_dim, layer.scaling, layer.o_proj, layer
        x = layer._rms_norm(h, layer.norm_in)
    else:
        attn, parts = layer.self_attn, joined(layer)
        d, scaling, out_proj = attn.head_dim, attn.scaling, attn.o_proj
        x = _norm(layer.input_layernorm, h)
    qkv = product(parts.qkv, x)[0]  # (T, N·D + 2·G·D)
    heads = parts.q_size // d
    qk = qkv[:, :parts.q_size + parts.kv_size].view(t, -1, d).transpose(0, 1)  # (N + G, T, D)
    qk = torch.addcmul(qk * cos, qk.roll(d // 2, dims=-1), signed_sin)
    q, k = qk[:heads], qk[heads:]  # (N, T, D), (G, T, D)
    v = qkv[:, parts.q_size + parts.kv_size:].view(t, -1, d).transpose(0, 1)  # (G, T, D)
    keys.index_copy_(2, slots, k[None].to(keys.dtype))
    values.index_copy_(2, slots, v[None].to(values.dtype))
    a = whole_buffer_attention(q, keys[0], values[0], mask, scaling)  # (T, N·D)
    h = product(out_proj, a[None], residual=h)
    if isinstance(layer, FusedLlamaLayer):
        x, down, act_fn = layer._rms_norm(h, layer.norm_post), layer.down_proj, layer.act_fn
    else:
        x, down, act_fn = _norm(layer.post_attention_layernorm, h), layer.mlp.down_proj, layer.mlp.act_fn
    gate, up = product(parts.gate_up, x).split([parts.inner, parts.inner], dim=-1)
    return product(down, act_fn(gate) * up, residual=h)


def _norm(norm: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A plain layer's RMSNorm: in float32 one ``F.rms_norm`` (HF's module runs six kernels), else the module."""
    if x.dtype == torch.float32 and norm.weight.dtype == torch.float32:
        return F.rms_norm(x, norm.weight.shape, norm.weight, norm.variance_epsilon)
    return norm(x)
