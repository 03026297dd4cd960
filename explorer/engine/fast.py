"""The CPU fast path: a view of the model whose linears run the kernels chosen for this machine, and whose
Llama layers are fused and compiled.

Why: verification runs K + 1 tokens in one forward, and on a CPU the cost of that forward against a
one-token one, T(K + 1)/T(1), decides whether drafting pays at all (Leviathan Theorem 3.8 assumes it is
1); and plain decoding pays T(1) per token. Which matrix kernel is fastest for 1 row, for 2–8 and for
9–64 differs between CPUs (``engine.kernels`` measures it once per machine), and a quarter of a one-token
forward was Python and dispatch around the matrix products (``engine.compiled`` compiles the layer).

How, without touching the shared model: ``fast_view(module)`` returns a *shadow* of the module tree —
new module objects whose parameters and buffers are the originals' own tensors (nothing copied), except
that every ``nn.Linear`` becomes a ``KernelLinear`` (``engine.kernel_linear``: the chosen kernel per row
count, over the weight as each kernel wants it: oneDNN's packed layouts are reordered copies) and every
plain Llama decoder layer a ``FusedLlamaLayer`` (``engine.fused_layer``: q/k/v in one product, gate/up in
another; run by the compiled layer where there is one). The model itself stays as it was: HF ``generate`` (the benchmark's baseline), HF assisted
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

import contextlib
import copy
import dataclasses
import hashlib
import os
import threading
import time
import weakref

import torch

from .. import machine
from . import compiled, kernels
from .fused_layer import FusedLlamaLayer
from .kernel_linear import KernelLinear

_LOCK = threading.RLock()
# module -> (view or None, [(weight, version)], kernel choice)
_VIEWS: "weakref.WeakKeyDictionary[torch.nn.Module, tuple]" = weakref.WeakKeyDictionary()
_VIEW_BYTES: "weakref.WeakKeyDictionary[torch.nn.Module, int]" = weakref.WeakKeyDictionary()  # a view → bytes it added


def enabled() -> bool:
    """Whether the fast path may be used at all (``EXPLORER_FAST_PATH=0`` turns it off, for comparisons)."""
    return os.environ.get("EXPLORER_FAST_PATH", "1").strip().lower() not in ("0", "false", "no", "off")


def packable(weight: torch.Tensor | None) -> bool:
    """A weight the fast path serves: a CPU float32 or bfloat16 tensor, with the path enabled."""
    return weight is not None and weight.device.type == "cpu" \
        and weight.dtype in (torch.float32, torch.bfloat16) and enabled()


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
    counted = _VIEW_BYTES.get(cached[0])
    if counted is None:  # a view's forms are fixed once built (``_build``): counted once, not on every cache hit
        counted = _VIEW_BYTES[cached[0]] = sum(m.extra_bytes() for m in cached[0].modules() if isinstance(m, KernelLinear))
    return counted



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
    with contextlib.ExitStack() as held:  # another process choosing them: wait, then read its choice
        if choice is None:
            held.enter_context(machine.one_process_at_a_time(kernels.cache_path(signature, dtype)))
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
