"""The decoder layer compiled for this machine: the Python taken out of a forward.

Why: a one-token forward of the default model on the CPU fast path makes ≈ 35 small calls a layer (norms,
rotary, splits, the KV write, SDPA, residual adds) around its 4 matrix products; on a 2-core machine each
costs 5–50 µs of Python and dispatch, ≈ 10 ms a forward, a quarter of it (``explorer profile``).

How: ``llama_layer`` below is one Llama decoder layer as a pure function of tensors — the layer's weights
and its KV cache buffers are arguments, so one compiled function serves every layer of a model (and the
early exit's and the feature head's layers of the same shape). It is traced once with symbolic sizes (rows
T, cached positions S, buffer capacity C: one artifact for every row count and context length) and compiled
by inductor into fused C++ kernels (``torch._inductor.standalone_compile``). The matrix products stay the
kernels ``engine.kernels`` chose for this machine: a graph of the oneDNN family takes the packed weights as
arguments and calls oneDNN's op on them directly from the generated code (inductor's own lowering of that op
wants weights frozen into the graph, one graph per layer, so the compiling process makes it a plain call);
one of the MKL family takes dense weights. A layer whose row buckets chose both runs one artifact of each.
The KV write is an in-place ``index_copy_`` into the cache's buffer (``engine.cache.GrowingLayer``), fused
into the attention's prologue.

The compilation runs once per machine in a child process with a time limit (``COMPILE_TIMEOUT_S``; inductor
needs a C++ compiler: gcc here), the artifact is kept under ``$EXPLORER_CACHE/compiled/`` keyed by
``machine.fingerprint`` (a kernel built for one CPU's vector units must not run on another), this file's
code and the layer's shape, and each later process loads it (≈ 1–3 s). Loaded, it is checked against the
eager function on random inputs before it is used. Anything that fails — no compiler, a timeout, a check
that disagrees, an unsupported layer — leaves the eager fast path in place and says why
(``status()``; ``explorer profile`` prints it). ``EXPLORER_COMPILE=0`` turns it off; by default a model of
tiny layers is left eager (``worth_it``), ``EXPLORER_COMPILE=1`` compiles those too.

Shape legend: T new rows, S cached + new positions, C the cache buffer's capacity, H hidden size,
N query heads, G key/value heads, D head size, I the MLP's inner size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from .. import machine
from ..errors import one_line
from . import lowbit
from .kernels import PACKED_ROWS, say

MIN_LAYER_WEIGHTS = 10**6  # "auto" compiles layers from this size (SmolLM2-135M's: 3.5 M weights)
COMPILE_TIMEOUT_S = 300  # a cold compile took 8–25 s on 2 cores here; past this the eager path stays
TRACE_ROWS, TRACE_PAST, TRACE_CAPACITY = 7, 113, 251  # example sizes equal to no model dimension (see _compile)
FAMILY = {"mkl": "mkl", "onednn-1": "onednn", "onednn-8": "onednn"}  # kernel -> the graph that calls it
# tensors each product's weight is passed as, per family: one (dense or packed), or the low-bit kernels' two
# (``engine.lowbit``: codes and their scales); "dense" is a low-bit layer's de-quantised fallback (a plain product)
ARITY = {"mkl": 1, "onednn": 1, "dense": 1, "int4": 2, "int8": 2}


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
    family: str  # "onednn" (packed weights) | "mkl" or "dense" (dense weights) | "int4" | "int8" (engine.lowbit)
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


# -- compiling, keeping, loading -------------------------------------------------------------------------

_LOCK = threading.Lock()
_STEPS: dict[LayerShape, Callable | None] = {}
_STATUS: dict[LayerShape, str] = {}
_PAUSED = threading.local()  # per thread: ``eager()`` turns compiled layers off for comparisons


def mode() -> str:
    """``EXPLORER_COMPILE``: "auto" (the default: layers big enough to pay for loading the compiler's runtime,
    ``MIN_LAYER_WEIGHTS``), "1" (every layer the fast path fuses: what the tests of tiny models use) or "0"."""
    value = os.environ.get("EXPLORER_COMPILE", "auto").strip().lower()
    return "0" if value in ("0", "false", "no", "off") else "1" if value in ("1", "true", "yes", "on") else "auto"


def enabled() -> bool:
    return mode() != "0"


def worth_it(shape: "LayerShape") -> bool:
    """Whether ``shape``'s layer is compiled under the current mode. Loading a compiled layer costs a process
    3–5 s once (inductor's runtime); it saves ≈ 0.4 ms a layer per forward, so a model of tiny layers (the
    tests' random ones: a forward of a few ms) decodes eagerly unless ``EXPLORER_COMPILE=1``."""
    weights = shape.hidden * ((shape.heads + 2 * shape.kv_heads) * shape.head_dim + 3 * shape.inner) \
        + shape.heads * shape.head_dim * shape.hidden
    return mode() == "1" or (mode() == "auto" and weights >= MIN_LAYER_WEIGHTS)


def paused() -> bool:
    return getattr(_PAUSED, "on", False)


@contextlib.contextmanager
def eager():
    """Run the eager fast path inside this block (``explorer profile`` compares the two)."""
    before = paused()
    _PAUSED.on = True
    try:
        yield
    finally:
        _PAUSED.on = before


def status() -> dict[str, str]:
    """Each layer shape's state in words ("compiled now in 9.8 s", "compiled, loaded in 1.2 s", "eager: …")."""
    return {f"H{s.hidden}/I{s.inner}/{s.dtype}/{s.family}": text for s, text in _STATUS.items()}


def _source_key() -> str:
    """This file's code: an edit to the layer makes a new artifact."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


def artifact_path(shape: LayerShape) -> Path:
    key = machine.fingerprint("llama-layer", dataclasses.astuple(shape), _source_key())
    return machine.cache_root() / "compiled" / f"llama-layer-{key}"


def layer_step(shape: LayerShape) -> Callable | None:
    """The compiled layer for ``shape`` — built once per machine, loaded once per process — or None (the
    eager path), with the reason in ``status()``."""
    if not worth_it(shape):
        return None
    with _LOCK:
        if shape not in _STEPS:
            _STEPS[shape] = _prepare(shape)
        return _STEPS[shape]


def _prepare(shape: LayerShape) -> Callable | None:
    path = artifact_path(shape)
    failed = path.with_suffix(".failed")
    if failed.exists():
        _STATUS[shape] = f"eager: compiling failed before on this machine ({failed.read_text()[:200]}); " \
                         f"delete {failed} to try again"
        return None
    start = time.perf_counter()
    built = False
    try:
        if not path.exists():
            say(f"Compiling the decoder layer for this CPU once (≈ 10–30 s on 2 cores; kept in {path.parent}) …")
            _build_in_child(shape, path)
            built = True
        from torch._inductor import CompiledArtifact

        artifact = CompiledArtifact.load(path=str(path), format="binary")
        try:
            step = _checked(shape, _direct(artifact))
        except Exception:  # noqa: BLE001 — the inner call moved in this torch: the public one, checked
            step = _checked(shape, lambda *args: _first(artifact(*args)))
    except Exception as err:  # noqa: BLE001 — any failure leaves the eager path, with its reason
        reason = one_line(err, 200)
        _STATUS[shape] = f"eager: the compiled layer is unavailable ({reason})"
        if built or not path.exists():
            try:
                failed.parent.mkdir(parents=True, exist_ok=True)
                failed.write_text(reason)
            except OSError:
                pass
        say(f"note: the decoder layer runs eagerly ({reason})")
        return None
    seconds = time.perf_counter() - start
    _STATUS[shape] = f"compiled now in {seconds:.1f} s" if built else f"compiled, loaded in {seconds:.1f} s"
    return step


def _first(out):
    return out[0] if isinstance(out, (list, tuple)) else out


def _direct(artifact) -> Callable:
    """The generated code's own entry point inside a loaded artifact, without the four Python wrappers
    around it (≈ 25 µs a call here, 30 calls a forward). The wrappers handle what this graph does not have:
    gradients, tensor subclasses, outputs aliasing inputs; the cache writes are in-place in the kernels.
    Found by walking the wrapper's closures (torch 2.13); another torch that hides it raises here and the
    public call is used (``_prepare``)."""
    from torch._inductor.output_code import CompiledFxGraph

    seen, todo = set(), [artifact._compiled_fn]
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        if isinstance(fn, CompiledFxGraph):
            inner = fn.current_callable
            return lambda *args: _first(inner(list(args)))
        todo += [cell.cell_contents for cell in (getattr(fn, "__closure__", None) or ()) if callable(cell.cell_contents)]
    raise RuntimeError("no compiled graph inside the artifact")


def _build_in_child(shape: LayerShape, path: Path) -> None:
    """Trace and compile in a child process with a time limit: a compiler that hangs or a machine too slow
    costs at most ``COMPILE_TIMEOUT_S``, and inductor's memory goes with the child."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    try:
        done = subprocess.run([sys.executable, "-c", "from explorer.engine.compiled import main; main()",
                               json.dumps(dataclasses.asdict(shape)), str(path)],
                              env=env, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"compiling took over {COMPILE_TIMEOUT_S} s") from None
    if done.returncode != 0 or not path.exists():
        lines = [line for line in (done.stderr or "").splitlines() if line.strip()]
        raise RuntimeError(lines[-1] if lines else f"the compiler exited with {done.returncode}")


def _example(shape: LayerShape, rows: int, past: int, capacity: int, generator=None):
    """Activations and cache arguments of ``llama_layer`` for ``rows`` new rows after ``past`` cached ones."""
    dtype = getattr(torch, shape.dtype)
    g, d, hsz = shape.kv_heads, shape.head_dim, shape.hidden
    rand = functools.partial(torch.randn, generator=generator, dtype=dtype)
    angles = rand(1, rows, d // 2).float()
    cos = torch.cat([angles.cos()] * 2, -1).to(dtype)  # (1, T, D)
    sin = torch.cat([angles.sin()] * 2, -1).to(dtype)
    mask = torch.zeros(rows, past + rows, dtype=dtype)
    mask[:, past:] = torch.full((rows, rows), torch.finfo(dtype).min, dtype=dtype).triu(1)  # causal
    return [rand(1, rows, hsz), rand(1, g, capacity, d) * 0.1, rand(1, g, capacity, d) * 0.1,
            torch.arange(past, past + rows), cos, sin, mask[None, None]]


def _weights(shape: LayerShape, generator=None) -> list[torch.Tensor]:
    """Random weights of ``shape``'s layer in its family's form, ordered as ``weight_arguments``. Every one a
    tensor of its own: a graph traced with one object in two places reads the first for both."""
    dtype = getattr(torch, shape.dtype)
    outs = [(shape.heads + 2 * shape.kv_heads) * shape.head_dim, shape.hidden, 2 * shape.inner, shape.hidden]
    ins = [shape.hidden, shape.heads * shape.head_dim, shape.hidden, shape.inner]
    dense = [torch.randn(o, i, generator=generator) * i ** -0.5 for o, i in zip(outs, ins)]
    if shape.family == "int4":  # the family's own tensors, never a timing's choice (``lowbit.choose``): a busy
        # child once chose the de-quantised product, failed this compile and marked it failed for good
        products = [lowbit.pack_int4(lowbit.Int4Blocks.rounded(w), dtype) for w in dense]
    elif shape.family == "int8":
        products = [(codes, scales.to(dtype)) for codes, scales in map(lowbit.int8_rows, dense)]
    elif shape.family == "onednn":
        products = [(torch.ops.mkldnn._reorder_linear_weight(w.to(dtype), PACKED_ROWS["onednn-8"]),) for w in dense]
    else:
        products = [(w.to(dtype),) for w in dense]
    norms = [1 + 0.1 * torch.randn(shape.hidden, generator=generator, dtype=dtype) for _ in range(2)]
    biases = [0.1 * torch.randn(o, generator=generator, dtype=dtype) for o in outs]
    return list(weight_arguments(shape, products, norms, biases))


def _compile(shape: LayerShape, path: Path) -> None:
    """(In the child.) Trace ``llama_layer`` with symbolic sizes and compile it into ``path``. The example
    sizes are chosen to equal no model dimension: a size that equals a constant would be merged with it and
    baked in (the check after loading catches one that slips through)."""
    from torch._inductor import lowering
    from torch.fx.experimental.proxy_tensor import make_fx

    # oneDNN's op as a plain call from the generated code: inductor's own lowering of it insists on weights
    # frozen into the graph, and its oneDNN fusion passes rewrite products into variants it cannot trace
    # (this process only: it exits after saving; the op itself runs whatever the flag says)
    lowering.lowerings.pop(torch.ops.mkldnn._linear_pointwise.default, None)
    lowering.make_fallback(torch.ops.mkldnn._linear_pointwise.default)
    torch.backends.mkldnn.enabled = False
    if {shape.hidden, shape.heads, shape.kv_heads, shape.head_dim, shape.inner} \
            & {TRACE_ROWS, TRACE_PAST + TRACE_ROWS, TRACE_CAPACITY}:
        raise RuntimeError("the layer's shape collides with the tracing sizes")
    inputs = _example(shape, TRACE_ROWS, TRACE_PAST, TRACE_CAPACITY) + _weights(shape)
    with torch.inference_mode():
        graph = make_fx(functools.partial(llama_layer, shape), tracing_mode="symbolic")(*inputs)
    artifact = torch._inductor.standalone_compile(graph, inputs, dynamic_shapes="from_graph", options={"config_patches": {
        "cpp.enable_kernel_profile": True,  # the fused kernels show in torch.profiler (explorer profile)
        # no size and alignment checks on every call (≈ 20 a layer, 2 µs each here): the caller
        # (FusedLlamaLayer) hands over what the trace saw, and the check after loading runs each shape class
        "size_asserts": False, "alignment_asserts": False,
        "cpp_wrapper": True}})  # the per-call glue (allocations, kernel calls) in C++ too, not Python
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    artifact.save(path=str(temporary), format="binary")
    os.replace(temporary, path)


def _checked(shape: LayerShape, step: Callable) -> Callable:
    """``step`` if it computes what ``llama_layer`` computes eagerly (one row and four, over a past, with
    random weights), cache writes included; else an error."""
    generator = torch.Generator().manual_seed(0)
    dtype = getattr(torch, shape.dtype)
    weights = _weights(shape, generator)
    tolerance = 1e-4 if dtype == torch.float32 else 5e-2
    with torch.inference_mode():
        for rows, past in ((1, 9), (4, 5), (12, 3)):
            args = _example(shape, rows, past, 32, generator)
            mine = [a.clone() for a in args]
            expected = llama_layer(shape, *args, *weights)
            got = step(*mine, *weights)
            error = float((got.float() - expected.float()).abs().max())
            cache_error = max(float((mine[i] - args[i]).abs().max()) for i in (1, 2))
            if not error <= tolerance * max(1.0, float(expected.abs().max())) or not cache_error <= tolerance:
                raise RuntimeError(f"the compiled layer disagrees with the eager one ({rows} rows: {error:.2g})")
    return step


def main() -> None:
    """The child process of ``_build_in_child``: ``python -c "…main()" SHAPE_JSON PATH``."""
    _compile(LayerShape(**json.loads(sys.argv[1])), Path(sys.argv[2]))
