"""A Llama decoder layer fused for decoding: q/k/v in one product, gate/up in another, run by the compiled
layer (``engine.compiled``) where it fits, and ``run_compiled``, which runs a stack of them with the mask,
positions and rotary tables made once. The fast view (``engine.fast``) makes one of each of a model's
layers over its kernels' linears (``engine.kernel_linear``); a low-bit copy (``engine.lowbit_decoder``)
over its low-bit products.

Shape legend: B batch, T new tokens, S cached + new positions, N query heads, G key/value heads,
D head size, H hidden size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import compiled, kernels, layer_maths, lowbit
from .cache import GrowingLayer, cache_layer
from .kernel_linear import KernelLinear
from .products import LayerProduct


class FusedLlamaLayer(torch.nn.Module):
    """A Llama decoder layer on this machine's kernels, with q/k/v in one product and gate/up in another,
    run by the compiled layer (``engine.compiled``) where there is one and the call allows it (batch 1, a
    cache whose layers grow in place), else eagerly below.

    The same function as ``LlamaDecoderLayer`` (RMSNorm → attention with rotary embeddings over the KV
    cache → residual → RMSNorm → SwiGLU MLP → residual), called the same way, but 4 matmuls a layer instead
    of 7 and none of the generic module plumbing. The layer it was made from is read, never changed.

    Shape legend: B batch, T new tokens, S cached + new positions, N query heads, G key/value heads,
    D head size, H hidden size.
    """

    @staticmethod
    def fits(layer: torch.nn.Module) -> bool:
        """A plain Llama layer: its parts have the names and kinds this forward assumes."""
        if type(layer).__name__ != "LlamaDecoderLayer":
            return False
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        linears = [getattr(attn, n, None) for n in ("q_proj", "k_proj", "v_proj", "o_proj")] + \
                  [getattr(mlp, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
        norms = [getattr(layer, n, None) for n in ("input_layernorm", "post_attention_layernorm")]
        implementation = getattr(getattr(attn, "config", None), "_attn_implementation", None)
        return all(isinstance(m, torch.nn.Linear) for m in linears) \
            and all(hasattr(m, "weight") and hasattr(m, "variance_epsilon") for m in norms) \
            and implementation in ("sdpa", "eager") and getattr(attn, "attention_dropout", 0.0) == 0.0 \
            and callable(getattr(mlp, "act_fn", None))

    def __init__(self, layer: torch.nn.Module, kinds=("onednn-8",) * 3,
                 products: tuple[LayerProduct, LayerProduct, LayerProduct, LayerProduct] | None = None):
        """``products``: the layer's four products (q/k/v, o, gate/up, down) made elsewhere, all taking and
        giving one dtype (a low-bit copy's, ``engine.lowbit``), its norms then run in that dtype too; by
        default the layer's own weights on this machine's kernels (``kinds``)."""
        super().__init__()
        attn, mlp = layer.self_attn, layer.mlp
        self.layer_idx = attn.layer_idx
        self.head_dim = attn.head_dim
        self.groups = attn.num_key_value_groups
        self.scaling = attn.scaling
        self.q_size = attn.q_proj.out_features
        self.kv_size = attn.k_proj.out_features
        self.inner = mlp.gate_proj.out_features
        if products is None:
            with torch.no_grad():
                qkv = [attn.q_proj, attn.k_proj, attn.v_proj]
                bias = None if attn.q_proj.bias is None else torch.cat([m.bias for m in qkv])
                qkv = KernelLinear(torch.cat([m.weight for m in qkv]), bias, kinds, owned=True)  # (N·D + 2·G·D, H)
                gate_up = [mlp.gate_proj, mlp.up_proj]
                bias = None if mlp.gate_proj.bias is None else torch.cat([m.bias for m in gate_up])
                gate_up = KernelLinear(torch.cat([m.weight for m in gate_up]), bias, kinds, owned=True)  # (2·I, H)
            products = (qkv, KernelLinear(attn.o_proj.weight, attn.o_proj.bias, kinds), gate_up,
                        KernelLinear(mlp.down_proj.weight, mlp.down_proj.bias, kinds))
        self.qkv, self.o_proj, self.gate_up, self.down_proj = products
        if not all(isinstance(p, LayerProduct) for p in products):
            raise TypeError("a fused layer's products are LayerProducts (engine.products)")
        dtype = self.qkv.dtype
        self.act_fn = mlp.act_fn
        # ``.to`` is the same tensor where the dtype is already the layer's (the fast view: nothing copied)
        self.norm_in = (layer.input_layernorm.weight.detach().to(dtype), layer.input_layernorm.variance_epsilon)
        self.norm_post = (layer.post_attention_layernorm.weight.detach().to(dtype),
                          layer.post_attention_layernorm.variance_epsilon)
        self.silu = type(self.act_fn).__name__ == "SiLUActivation" or self.act_fn is F.silu
        self._kv_like = torch.empty(1, self.kv_size // self.head_dim, 0, self.head_dim, dtype=dtype)
        self._steps: tuple = (None,) * len(kernels.BUCKETS)  # per row bucket: (compiled step, its weights)

    @property
    def compiled_buckets(self) -> tuple[bool, ...]:
        """Per row bucket (``kernels.BUCKETS``): whether its forwards run the compiled layer (else eagerly)."""
        return tuple(step is not None for step in self._steps)

    def bind(self, kinds) -> None:
        """Run each row bucket's kernel (``kinds``) through the compiled layer of its family (MKL: dense
        weights; oneDNN: packed), where there is one; call after the linears ``keep`` them."""
        shapes = [self._shape(kind, bucket) for bucket, kind in enumerate(kinds)]
        compiled.build_missing([shape for shape in shapes if shape is not None])  # at once, not one after another
        self._steps = tuple(None if shape is None else self._compiled(shape, kind) for shape, kind in zip(shapes, kinds))

    def _shape(self, kind: str, bucket: int) -> layer_maths.LayerShape | None:
        """The compiled layer's shape for row bucket ``bucket``'s kernel ``kind``, or None (SiLU MLPs only; see
        ``engine.compiled``). The products say how the compiled layer calls them (``compiled_form``): all four
        must be of one family. A low-bit copy's steps of up to 8 rows attend by fused reductions
        (``layer_maths.attention_rows``); everything else, and the target always, by batched products."""
        forms = [m.compiled_form(kind) for m in self._linears]
        if self.norm_in[0].device.type != "cpu":
            return None  # the compiled layer is C++ for this CPU; a GPU's forwards are graphed (engine.cuda_graphs)
        if not self.silu or self.norm_post[1] != self.norm_in[1] or None in forms \
                or len({family for family, _ in forms}) != 1:
            return None
        biases = [m.bias_tensor for m in self._linears]
        if any(b is None for b in biases) and any(b is not None for b in biases):
            return None
        weight = self.norm_in[0]
        return layer_maths.LayerShape(
            hidden=weight.shape[0], heads=self.q_size // self.head_dim, kv_heads=self.kv_size // self.head_dim,
            head_dim=self.head_dim, inner=self.inner, eps=float(self.norm_in[1]), scaling=float(self.scaling),
            dtype=str(weight.dtype).replace("torch.", ""), family=forms[0][0], bias=biases[0] is not None,
            attention="rows" if bucket <= 1 and forms[0][0] in lowbit.FAMILIES else "bmm")

    def _compiled(self, shape: layer_maths.LayerShape, kind: str):
        """(compiled step, its weight arguments) for ``shape`` with the products' ``kind`` forms, or None."""
        step = compiled.layer_step(shape)
        if step is None:
            return None
        return step, layer_maths.weight_arguments(shape, [m.compiled_form(kind)[1] for m in self._linears],
                                                  (self.norm_in[0], self.norm_post[0]),
                                                  [m.bias_tensor for m in self._linears])

    @property
    def _linears(self) -> tuple:
        return self.qkv, self.o_proj, self.gate_up, self.down_proj

    def _rms_norm(self, x: torch.Tensor, norm: tuple[torch.Tensor, float]) -> torch.Tensor:
        """HF's RMSNorm: in float32 one kernel (F.rms_norm: 15 µs against 23 µs for HF's six ops, same result
        on the default model); in bf16 HF's own order (float32 inside, the weight after the cast back)."""
        weight, eps = norm
        if x.dtype == torch.float32:
            return F.rms_norm(x, weight.shape, weight, eps)
        return layer_maths.rms_norm(x, weight, eps)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids=None, past_key_values=None, use_cache: bool = False,
                position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None, **_) -> torch.Tensor:
        b, t, _h = hidden_states.shape
        step = self._steps[kernels.bucket(t)]
        if step is not None and b == 1 and past_key_values is not None and not compiled.paused():
            layer = cache_layer(past_key_values, self.layer_idx)
            if isinstance(layer, GrowingLayer) and (attention_mask is None or attention_mask.numel()
                                                    == t * (layer.get_seq_length() + t)):
                return self._compiled_forward(step, hidden_states, attention_mask, layer, position_embeddings)
        x = self._rms_norm(hidden_states, self.norm_in)
        q, k, v = self.qkv(x).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = q.view(b, t, -1, self.head_dim).transpose(1, 2)  # (B, N, T, D)
        k = k.view(b, t, -1, self.head_dim).transpose(1, 2)  # (B, G, T, D)
        v = v.view(b, t, -1, self.head_dim).transpose(1, 2)  # (B, G, T, D)
        cos, sin = position_embeddings  # (B, T, D) each
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + layer_maths.rotate_half(q) * sin
        k = k * cos + layer_maths.rotate_half(k) * sin
        if past_key_values is not None:
            k, v = past_key_values.update(k, v, self.layer_idx)  # (B, G, S, D)
        mask, causal = attention_mask, False
        if mask is None and t > 1:
            if k.shape[2] == t:
                causal = True
            else:  # SDPA's causal flag aligns to the top-left corner; a past needs the explicit mask
                mask = torch.ones(t, k.shape[2], dtype=torch.bool, device=k.device).tril(k.shape[2] - t)
        # grouped-query attention inside SDPA, mask or not: HF repeats K and V per query head when there is a
        # mask (a copy of the cache per layer, ≈ 45 µs at 130 positions); same result here, 28 µs against 48
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=self.scaling,
                                           enable_gqa=self.groups > 1)  # (B, N, T, D)
        a = a.transpose(1, 2).reshape(b, t, -1)  # (B, T, N·D)
        hidden_states = hidden_states + self.o_proj(a)
        x = self._rms_norm(hidden_states, self.norm_post)
        gate, up = self.gate_up(x).split([self.inner, self.inner], dim=-1)
        return hidden_states + self.down_proj(self.act_fn(gate) * up)

    def _compiled_forward(self, step, hidden_states, attention_mask, layer: GrowingLayer, position_embeddings):
        """The compiled layer over (1, T, H): room made in the KV cache's buffers, which the step writes."""
        t = hidden_states.shape[1]
        past = layer.get_seq_length()
        cos, sin = position_embeddings  # (1, T, D) each
        return _run_step(step, layer, self._kv_like, hidden_states.contiguous(), _slots(past, t), cos.contiguous(),
                         sin.contiguous(), _additive(attention_mask, t, past + t, hidden_states.dtype))


def _run_step(step, layer: GrowingLayer, kv_like, hidden, slots, cos, sin, mask) -> torch.Tensor:
    """One compiled layer: room made in ``layer``'s buffers, the step writes the new keys and values there
    (the inputs as the step was traced with: contiguous), the views extended over them."""
    compiled_layer, weights = step
    keys, values, _ = layer.reserve(kv_like, hidden.shape[1])  # (1, G, C, D) each
    out = compiled_layer(hidden, keys, values, slots, cos, sin, mask, *weights)  # (1, T, H)
    layer.advance(hidden.shape[1])
    return out


def run_compiled(layers, hidden: torch.Tensor, past: int, mask: torch.Tensor | None, rotary, cache) -> torch.Tensor | None:
    """``layers`` over (1, T, H) after ``past`` cached positions, every one through its compiled step, with
    the mask, positions and rotary tables made once for all of them; None (nothing run) when one of them
    cannot (the caller then runs them one by one): what decoding's forwards run (``forward.run_layers``)."""
    b, t, _ = hidden.shape
    if b != 1 or compiled.paused() or cache is None:
        return None
    bucket = kernels.bucket(t)
    plan = []
    for layer in layers:
        step = layer._steps[bucket] if isinstance(layer, FusedLlamaLayer) else None
        cached = cache_layer(cache, layer.layer_idx) if step is not None else None
        if not isinstance(cached, GrowingLayer) or cached.get_seq_length() != past:
            return None
        plan.append((step, cached, layer._kv_like))
    s = past + t
    if mask is not None and mask.numel() != t * s:
        return None
    slots, mask = _slots(past, t), _additive(mask, t, s, hidden.dtype)
    cos, sin = (r.contiguous() for r in rotary)
    hidden = hidden.contiguous()
    for step, cached, kv_like in plan:
        hidden = _run_step(step, cached, kv_like, hidden, slots, cos, sin, mask)
    return hidden


_MEMO: dict = {}  # the last few derived tensors (a forward asks each layer for the same ones)


def _memo(key, make):
    value = _MEMO.get(key)
    if value is None:
        if len(_MEMO) > 8:
            _MEMO.clear()
        value = _MEMO[key] = make()
    return value


def _slots(past: int, t: int) -> torch.Tensor:
    """(T,) cache positions past … past + T − 1."""
    return _memo(("slots", past, t), lambda: torch.arange(past, past + t))


def _additive(mask: torch.Tensor | None, t: int, s: int, dtype: torch.dtype) -> torch.Tensor:
    """The (1, 1, T, S) additive mask the compiled layer reads: the caller's (additive or boolean), or the
    causal one when there is none (a single row sees every key)."""
    if mask is None:
        if t == 1:
            return _memo(("zeros", s, dtype), lambda: torch.zeros(1, 1, 1, s, dtype=dtype))
        return _memo(("causal", t, s, dtype),
                     lambda: torch.full((1, 1, t, s), torch.finfo(dtype).min, dtype=dtype).triu(s - t + 1))
    if mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)
    return mask.to(dtype).reshape(1, 1, t, s).contiguous()
