"""The CPU fast path: every linear layer of a model through oneDNN's packed fp32 kernel, on a view.

Why: verification runs K + 1 tokens in one forward, and on a CPU the cost of that forward against a
one-token one, T(K + 1)/T(1), decides whether drafting pays at all (Leviathan Theorem 3.8 assumes it is
1). MKL's GEMM for 2–16 rows is far slower per row than its GEMV for one; oneDNN's linear over a weight
reordered once into its blocked layout is faster for one row and grows much more slowly with the rows
(README, "CPU fast path": on the default model T(1) 78 → 46 ms, T(5)/T(1) 1.39 → 0.97).

How, without touching the shared model: ``fast_view(module)`` returns a *shadow* of the module tree —
new module objects whose parameters and buffers are the originals' own tensors (nothing copied), except
that every ``nn.Linear`` becomes a ``PackedLinear`` holding the reordered weight and every plain Llama
decoder layer a ``FusedLlamaLayer`` (q/k/v in one packed GEMM, gate/up in another). The model itself stays
as it was: HF ``generate`` (the benchmark's baseline), HF assisted generation and the trainers run it
unchanged, while the engine's decode paths run the view. A view is made once per module and process and
made again if a source weight was changed in place since (the tensor's version counter), so a view never
serves stale weights.

Memory: one reordered copy of every linear weight, tied heads included (the default model: README).
Elsewhere — CUDA, fp16/bf16, a torch built without oneDNN, or ``EXPLORER_FAST_PATH=0`` — the view is the
module itself.

Shape legend: R rows (tokens), I input features, O output features.
"""

from __future__ import annotations

import copy
import functools
import os
import threading
import weakref

import torch
import torch.nn.functional as F

# oneDNN picks the packed layout for the number of rows a call is expected to have. Laid out for 1 row,
# every multi-row call is slow again (a 3072 × 576 weight: 0.09 ms for 1 row, 0.21 for 2, 0.31 for 8);
# for 8 rows, 1 row costs no more and 2-8 rows little more (0.07, 0.08, 0.18 ms): verification's sizes.
PACK_ROWS = 8

_LOCK = threading.Lock()
_VIEWS: "weakref.WeakKeyDictionary[torch.nn.Module, tuple[torch.nn.Module, list]]" = weakref.WeakKeyDictionary()


def enabled() -> bool:
    """Whether the packed path may be used at all (``EXPLORER_FAST_PATH=0`` turns it off, for comparisons)."""
    return os.environ.get("EXPLORER_FAST_PATH", "1").strip().lower() not in ("0", "false", "no", "off") \
        and _onednn_linear_available()


@functools.lru_cache(maxsize=1)
def _onednn_linear_available() -> bool:
    try:
        return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise") \
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    except (AttributeError, RuntimeError):
        return False


def packable(weight: torch.Tensor | None) -> bool:
    """A weight the packed kernel serves: a CPU float32 tensor, with the path enabled."""
    return weight is not None and weight.device.type == "cpu" and weight.dtype == torch.float32 and enabled()


class PackedLinear(torch.nn.Module):
    """``y = x Wᵀ + b`` through oneDNN with W reordered once; the same function as the ``nn.Linear`` (or
    the weight) it was made from, which it does not change. Inference only (the op has no gradient)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        with torch.no_grad():
            # the reordered weight is a plain attribute, not a parameter or buffer: state_dict, .to() and
            # parameter counts never see it (it is opaque: it cannot be copied or moved)
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), PACK_ROWS)
        self.bias_tensor = None if bias is None else bias.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features)  # (R, I)
        if not flat.is_contiguous():
            flat = flat.contiguous()
        out = torch.ops.mkldnn._linear_pointwise(flat, self.packed, self.bias_tensor, "none", [], "")  # (R, O)
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed (oneDNN)"


def fast_view(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` with every linear layer packed, sharing everything else; ``module`` itself where the
    packed kernel does not apply (see the module docstring). Cheap after the first call (a decode path
    may ask once per forward): the module tree is walked only to build a view."""
    if not enabled():
        return module
    cached = _fresh_view(module)
    if cached is None:
        with _LOCK:  # two sessions' first decodes at once build one view, not two
            cached = _fresh_view(module)
            if cached is None:
                weights = [m.weight for m in module.modules() if isinstance(m, torch.nn.Linear)]
                fits = bool(weights) and all(packable(w) for w in weights)
                # None: no view fits (and no strong reference back to the key, which would keep it alive)
                cached = (_shadow(module, {}) if fits else None, [(w, w._version) for w in weights])
                _VIEWS[module] = cached
    return module if cached[0] is None else cached[0]


def packed_bytes(module: torch.nn.Module) -> int:
    """Bytes of the packed copies a view of ``module`` holds (a reordered fp32 weight is as large as the
    weight); 0 before its first fast decode."""
    cached = _VIEWS.get(module)
    if cached is None or cached[0] is None:
        return 0
    return sum(w.numel() * w.element_size() for w, _ in cached[1])


def _fresh_view(module: torch.nn.Module):
    """The cached (view, weight versions) of ``module`` if no source weight changed since, else None."""
    cached = _VIEWS.get(module)
    return cached if cached is not None and all(w._version == v for w, v in cached[1]) else None


def _shadow(module: torch.nn.Module, done: dict[int, torch.nn.Module]) -> torch.nn.Module:
    """A new module tree over the same tensors, linears packed; a module reached twice (shared) is
    shadowed once."""
    if id(module) in done:
        return done[id(module)]
    if isinstance(module, torch.nn.Linear):
        view = PackedLinear(module.weight, module.bias)
    elif FusedLlamaLayer.fits(module):
        view = FusedLlamaLayer(module)
    else:
        view = copy.copy(module)  # a new object with the same attributes (config, hyper-parameters)
        view._parameters = dict(module._parameters)  # the same Parameter objects
        view._buffers = dict(module._buffers)
        view._modules = {}
        for name, child in module._modules.items():
            view._modules[name] = None if child is None else _shadow(child, done)
    done[id(module)] = view
    return view


class FusedLlamaLayer(torch.nn.Module):
    """A Llama decoder layer on packed weights, with q/k/v in one GEMM and gate/up in another.

    The same function as ``LlamaDecoderLayer`` (RMSNorm → attention with rotary embeddings over the KV
    cache → residual → RMSNorm → SwiGLU MLP → residual; float32 only, as the packed linears are), called
    the same way, but 4 matmuls a layer instead of 7 and none of the generic module plumbing: a forward
    of a 30-layer model makes 90 fewer kernel calls. The layer it was made from is read, never changed.

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

    def __init__(self, layer: torch.nn.Module):
        super().__init__()
        attn, mlp = layer.self_attn, layer.mlp
        self.layer_idx = attn.layer_idx
        self.head_dim = attn.head_dim
        self.groups = attn.num_key_value_groups
        self.scaling = attn.scaling
        self.q_size = attn.q_proj.out_features
        self.kv_size = attn.k_proj.out_features
        self.inner = mlp.gate_proj.out_features
        with torch.no_grad():
            qkv = [attn.q_proj, attn.k_proj, attn.v_proj]
            bias = None if attn.q_proj.bias is None else torch.cat([m.bias for m in qkv])
            self.qkv = PackedLinear(torch.cat([m.weight for m in qkv]), bias)  # (N·D + 2·G·D, H)
            gate_up = [mlp.gate_proj, mlp.up_proj]
            bias = None if mlp.gate_proj.bias is None else torch.cat([m.bias for m in gate_up])
            self.gate_up = PackedLinear(torch.cat([m.weight for m in gate_up]), bias)  # (2·I, H)
        self.o_proj = PackedLinear(attn.o_proj.weight, attn.o_proj.bias)
        self.down_proj = PackedLinear(mlp.down_proj.weight, mlp.down_proj.bias)
        self.act_fn = mlp.act_fn
        self.norm_in = (layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon)
        self.norm_post = (layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon)

    @staticmethod
    def _rms_norm(x: torch.Tensor, norm: tuple[torch.Tensor, float]) -> torch.Tensor:
        """HF's RMSNorm, x·rsqrt(mean(x²) + ε)·w, in one kernel (float32 only: HF computes in float32)
        — 15 µs against 23 µs for HF's six ops, same result on the default model, 61 norms a forward."""
        weight, eps = norm
        return F.rms_norm(x, weight.shape, weight, eps)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids=None, past_key_values=None, use_cache: bool = False,
                position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None, **_) -> torch.Tensor:
        b, t, _h = hidden_states.shape
        x = self._rms_norm(hidden_states, self.norm_in)
        q, k, v = self.qkv(x).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = q.view(b, t, -1, self.head_dim).transpose(1, 2)  # (B, N, T, D)
        k = k.view(b, t, -1, self.head_dim).transpose(1, 2)  # (B, G, T, D)
        v = v.view(b, t, -1, self.head_dim).transpose(1, 2)  # (B, G, T, D)
        cos, sin = position_embeddings  # (B, T, D) each
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
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


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
