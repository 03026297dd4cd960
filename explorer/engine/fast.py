"""The CPU fast path: a view of the model whose linears run the kernels chosen for this machine, and whose
Llama layers are fused and compiled.

Why: verification runs K + 1 tokens in one forward, and on a CPU the cost of that forward against a
one-token one, T(K + 1)/T(1), decides whether drafting pays at all (Leviathan Theorem 3.8 assumes it is
1); and plain decoding pays T(1) per token. Which matrix kernel is fastest for 1 row, for 2–8 and for
9–64 differs between CPUs (``engine.kernels`` measures it once per machine), and a quarter of a one-token
forward was Python and dispatch around the matrix products (``engine.compiled`` compiles the layer).

How, without touching the shared model: ``fast_view(module)`` returns a *shadow* of the module tree —
new module objects whose parameters and buffers are the originals' own tensors (nothing copied), except
that every ``nn.Linear`` becomes a ``KernelLinear`` (the chosen kernel per row count, over the weight as
each kernel wants it: oneDNN's packed layouts are reordered copies) and every plain Llama decoder layer a
``FusedLlamaLayer`` (q/k/v in one product, gate/up in another; run by the compiled layer where there is
one). The model itself stays as it was: HF ``generate`` (the benchmark's baseline), HF assisted
generation and the trainers run it unchanged, while the engine's decode paths run the view. A view is made
once per module and process and made again if a source weight was changed in place since (the tensor's
version counter), so a view never serves stale weights. Early-exit layers, the feature head and BiTA's
tree forward are views too, with the target's kernel choice (``fast_view(module, like=target)``).

Memory: one copy of every linear weight per packed layout in use, plus dense copies of the fused q/k/v and
gate/up weights where MKL's product runs them (``view_bytes``). Elsewhere — CUDA, fp16, a torch without
these kernels, or ``EXPLORER_FAST_PATH=0`` — the view is the module itself.

Shape legend: R rows (tokens), I input features, O output features.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import os
import threading
import time
import weakref

import torch
import torch.nn.functional as F

from .. import machine
from . import compiled, kernels
from .cache import GrowingLayer, cache_layer

_LOCK = threading.RLock()
# module -> (view or None, [(weight, version)], kernel choice)
_VIEWS: "weakref.WeakKeyDictionary[torch.nn.Module, tuple]" = weakref.WeakKeyDictionary()


def enabled() -> bool:
    """Whether the fast path may be used at all (``EXPLORER_FAST_PATH=0`` turns it off, for comparisons)."""
    return os.environ.get("EXPLORER_FAST_PATH", "1").strip().lower() not in ("0", "false", "no", "off")


def packable(weight: torch.Tensor | None) -> bool:
    """A weight the fast path serves: a CPU float32 or bfloat16 tensor, with the path enabled."""
    return weight is not None and weight.device.type == "cpu" \
        and weight.dtype in (torch.float32, torch.bfloat16) and enabled()


class KernelLinear(torch.nn.Module):
    """``y = x Wᵀ + b`` through the kernel ``kinds`` names for each row bucket (``engine.kernels``); the
    same function as the ``nn.Linear`` (or the weight) it was made from, which it does not change.
    Inference only (oneDNN's packed op has no gradient). A compiled layer reads its ``forms``."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None, kinds=("onednn-8",) * 3,
                 owned: bool = False):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.dtype = weight.dtype
        # plain attributes, not parameters or buffers: state_dict, .to() and parameter counts never see them
        # (a packed weight is opaque: it cannot be copied or moved)
        self.dense = weight.detach()
        self.owned = owned  # the dense weight is a copy made for this view (a fused one), not the model's
        self.bias_tensor = None if bias is None else bias.detach()
        self.forms: dict[str, torch.Tensor] = {}
        self.keep(tuple(kinds) if len(kinds) == len(kernels.BUCKETS) else (kinds[0],) * len(kernels.BUCKETS),
                  also=kinds)

    def keep(self, kinds: tuple[str, ...], also=()) -> None:
        """Run ``kinds`` (one per row bucket) from now on, and hold the weight in the forms they (and
        ``also``, for a measurement) need; drop the others."""
        wanted = set(kinds) | set(also)
        with torch.no_grad():
            for kind in wanted - set(self.forms):
                self.forms[kind] = self.dense if kind == "mkl" else \
                    torch.ops.mkldnn._reorder_linear_weight(self.dense.contiguous(), kernels.PACKED_ROWS[kind])
        for kind in set(self.forms) - wanted:
            del self.forms[kind]
        if self.owned and "mkl" not in wanted:
            self.dense = self.dense.new_empty(0, self.in_features)  # a fused copy no kernel reads: its memory goes
        self.kinds = tuple(kinds)
        self._by_bucket = tuple(self._kernel(kind) for kind in kinds)

    def _kernel(self, kind: str):
        """(R, I) -> (R, O) through ``kind``, as one call."""
        form, bias = self.forms[kind], self.bias_tensor
        if kind == "mkl":
            return functools.partial(F.linear, weight=form, bias=bias)
        pointwise = torch.ops.mkldnn._linear_pointwise.default
        return lambda x: pointwise(x, form, bias, "none", [], "")

    def compiled_form(self, kind: str) -> tuple[str, tuple[torch.Tensor]] | None:
        """(family, tensors) of ``kind``'s kernel as the compiled layer takes them (``engine.compiled``),
        None where this linear does not hold ``kind``'s form."""
        return (compiled.FAMILY[kind], (self.forms[kind],)) if kind in self.forms else None

    def run(self, kind: str, flat: torch.Tensor) -> torch.Tensor:
        """(R, I) -> (R, O) through ``kind`` (the kernel measurement's call)."""
        return self._kernel(kind)(flat)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features)  # (R, I)
        if not flat.is_contiguous():
            flat = flat.contiguous()
        rows = flat.shape[0]
        out = self._by_bucket[0 if rows <= 1 else 1 if rows <= 8 else 2](flat)  # (R, O)
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_bytes(self) -> int:
        """Memory this view added: the packed forms, and the dense weight where it is a copy."""
        packed = sum(f.numel() * f.element_size() for k, f in self.forms.items() if k != "mkl")
        return packed + (self.dense.numel() * self.dense.element_size() if self.owned else 0)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, kernels={'/'.join(self.kinds)}"


def fast_linear(weight: torch.Tensor, like: torch.nn.Module):
    """(…, I) -> (…, O) over ``weight`` (O, I) — a draft's own head rows — on the kernels ``like``'s view
    runs, or a plain product where the fast path does not apply."""
    fast_view(like)
    choice = kernel_choice(like)
    if choice is None or not packable(weight):
        return lambda x: x @ weight.T
    return KernelLinear(weight, kinds=choice.kinds)


def fast_view(module: torch.nn.Module, like: torch.nn.Module | None = None) -> torch.nn.Module:
    """``module`` with every linear on this machine's kernels and every Llama layer fused (and compiled
    where it can be); ``module`` itself where the fast path does not apply (see the module docstring).
    ``like``: a model whose kernel choice this module takes (an exit layer or a draft head takes its
    target's) instead of measuring its own. Cheap after the first call (a decode path may ask once per
    forward): the module tree is walked only to build a view."""
    if not enabled():
        return module
    cached = _fresh_view(module)
    if cached is None:
        with _LOCK:  # two sessions' first decodes at once build one view, not two
            cached = _fresh_view(module)
            if cached is None:
                cached = _VIEWS[module] = _build(module, like)
    return module if cached[0] is None else cached[0]


def speed_record(model: torch.nn.Module) -> dict:
    """What a report keeps of how this machine ran ``model``: the machine (``explorer.machine``), the kernel
    per row bucket and how it was chosen, the compiled layer's state, whether the fast path was on."""
    view = fast_view(model)
    choice = kernel_choice(model)
    states = sorted(set(compiled.status().values())) if view is not model else []
    return {"machine": machine.describe(), "kernels": choice.record() if choice else None,
            "compiled": "; ".join(states) if states else ("off" if view is not model else None),
            "fast_path": view is not model}


def kernel_choice(module: torch.nn.Module) -> "kernels.KernelChoice | None":
    """The kernel choice the view of ``module`` runs (None before its first fast decode, or without one)."""
    cached = _VIEWS.get(module)
    return None if cached is None else cached[2]


def view_bytes(module: torch.nn.Module) -> int:
    """Bytes the view of ``module`` added (packed layouts, fused dense copies); 0 before its first fast
    decode."""
    cached = _VIEWS.get(module)
    if cached is None or cached[0] is None:
        return 0
    return sum(m.extra_bytes() for m in cached[0].modules() if isinstance(m, KernelLinear))



def _fresh_view(module: torch.nn.Module):
    """The cached (view, weight versions, choice) of ``module`` if no source weight changed since, else None."""
    cached = _VIEWS.get(module)
    return cached if cached is not None and all(w._version == v for w, v in cached[1]) else None


def _build(module: torch.nn.Module, like: torch.nn.Module | None):
    weights = [m.weight for m in module.modules() if isinstance(m, torch.nn.Linear)]
    versions = [(w, w._version) for w in weights]
    if not weights or not all(packable(w) for w in weights) or len({w.dtype for w in weights}) > 1:
        return None, versions, None  # no view fits (and no strong reference back to the key)
    dtype = weights[0].dtype
    offered = kernels.available(dtype)
    choice = kernels.forced()
    if choice is None and like is not None and like is not module:
        fast_view(like)  # the target's view first (its choice is measured on its own linears)
        choice = kernel_choice(like)
    if choice is not None and not set(choice.kinds) <= set(offered):
        choice = kernels.KernelChoice(tuple(k if k in offered else offered[-1] for k in choice.kinds), choice.how)
    signature = _signature(weights)
    if choice is None and len(offered) == 1:
        choice = kernels.KernelChoice((offered[0],) * len(kernels.BUCKETS), "only")
    if choice is None:
        choice = kernels.read_cached(signature, dtype)
    measuring = choice is None
    size = sum(w.numel() for w in weights)
    loud = size >= 10**6  # a tiny test model is measured in milliseconds, without a word
    if measuring and loud:
        kernels.say(f"Choosing this CPU's matrix kernels for a {size / 1e6:.0f} M-weight model once "
                    f"(≤ 10 s; kept in {kernels.cache_path(signature, dtype).parent}) …")
    started = time.perf_counter()
    view = _shadow(module, {}, offered if measuring else choice.kinds)
    linears = [m for m in view.modules() if isinstance(m, KernelLinear)]
    if measuring:
        choice = kernels.measure(linears, offered, progress=kernels.say if loud else None)
        # what the choice cost: the weights packed in every candidate layout, then the timing
        choice = dataclasses.replace(choice, seconds=round(time.perf_counter() - started, 1))
        if loud:
            kernels.say("  " + choice.words())
        kernels.write_cached(signature, dtype, choice)
    for linear in linears:
        linear.keep(choice.kinds)
    for layer in (m for m in view.modules() if isinstance(m, FusedLlamaLayer)):
        layer.bind(choice.kinds)  # compiles (once per machine) or loads the layer for the kernels kept
    return view, versions, choice


def _signature(weights) -> str:
    """The model's linears' shapes (what the kernel choice depends on besides the machine and dtype)."""
    shapes = ",".join(f"{w.shape[0]}x{w.shape[1]}" for w in weights)
    return f"{len(weights)}-linears-{hashlib.sha256(shapes.encode()).hexdigest()[:12]}"


def _shadow(module: torch.nn.Module, done: dict[int, torch.nn.Module], kinds) -> torch.nn.Module:
    """A new module tree over the same tensors, linears on the chosen kernels; a module reached twice
    (shared) is shadowed once."""
    if id(module) in done:
        return done[id(module)]
    if isinstance(module, torch.nn.Linear):
        view = KernelLinear(module.weight, module.bias, kinds)
    elif FusedLlamaLayer.fits(module):
        view = FusedLlamaLayer(module, kinds)
    else:
        view = copy.copy(module)  # a new object with the same attributes (config, hyper-parameters)
        view._parameters = dict(module._parameters)  # the same Parameter objects
        view._buffers = dict(module._buffers)
        view._modules = {}
        for name, child in module._modules.items():
            view._modules[name] = None if child is None else _shadow(child, done, kinds)
    done[id(module)] = view
    return view


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

    def __init__(self, layer: torch.nn.Module, kinds=("onednn-8",) * 3, products: tuple | None = None):
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
        dtype = self.qkv.dtype
        self.act_fn = mlp.act_fn
        # ``.to`` is the same tensor where the dtype is already the layer's (the fast view: nothing copied)
        self.norm_in = (layer.input_layernorm.weight.detach().to(dtype), layer.input_layernorm.variance_epsilon)
        self.norm_post = (layer.post_attention_layernorm.weight.detach().to(dtype),
                          layer.post_attention_layernorm.variance_epsilon)
        self.silu = type(self.act_fn).__name__ == "SiLUActivation" or self.act_fn is F.silu
        self._kv_like = torch.empty(1, self.kv_size // self.head_dim, 0, self.head_dim, dtype=dtype)
        self._steps: tuple = (None,) * len(kernels.BUCKETS)  # per row bucket: (compiled step, its weights)

    def bind(self, kinds) -> None:
        """Run each row bucket's kernel (``kinds``) through the compiled layer of its family (MKL: dense
        weights; oneDNN: packed), where there is one; call after the linears ``keep`` them."""
        self._steps = tuple(self._compiled(kind) for kind in kinds)

    def _compiled(self, kind: str):
        """(compiled step, its weight arguments) for row bucket kernel ``kind``, or None (SiLU MLPs only;
        see ``engine.compiled``). The products say how the compiled layer calls them (``compiled_form``):
        all four must be of one family."""
        linears = (self.qkv, self.o_proj, self.gate_up, self.down_proj)
        forms = [m.compiled_form(kind) for m in linears]
        if not self.silu or self.norm_post[1] != self.norm_in[1] or None in forms \
                or len({family for family, _ in forms}) != 1:
            return None
        weight = self.norm_in[0]
        biases = [m.bias_tensor for m in linears]
        if any(b is None for b in biases) and any(b is not None for b in biases):
            return None
        shape = compiled.LayerShape(
            hidden=weight.shape[0], heads=self.q_size // self.head_dim, kv_heads=self.kv_size // self.head_dim,
            head_dim=self.head_dim, inner=self.inner, eps=float(self.norm_in[1]), scaling=float(self.scaling),
            dtype=str(weight.dtype).replace("torch.", ""), family=forms[0][0], bias=biases[0] is not None)
        step = compiled.layer_step(shape)
        if step is None:
            return None
        return step, compiled.weight_arguments(shape, [tensors for _, tensors in forms],
                                               (self.norm_in[0], self.norm_post[0]), biases)

    def _rms_norm(self, x: torch.Tensor, norm: tuple[torch.Tensor, float]) -> torch.Tensor:
        """HF's RMSNorm: in float32 one kernel (F.rms_norm: 15 µs against 23 µs for HF's six ops, same result
        on the default model); in bf16 HF's own order (float32 inside, the weight after the cast back)."""
        weight, eps = norm
        if x.dtype == torch.float32:
            return F.rms_norm(x, weight.shape, weight, eps)
        return compiled.rms_norm(x, weight, eps)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids=None, past_key_values=None, use_cache: bool = False,
                position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None, **_) -> torch.Tensor:
        b, t, _h = hidden_states.shape
        step = self._steps[0 if t <= 1 else 1 if t <= 8 else 2]
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
        q = q * cos + compiled.rotate_half(q) * sin
        k = k * cos + compiled.rotate_half(k) * sin
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
    bucket = 0 if t <= 1 else 1 if t <= 8 else 2
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
