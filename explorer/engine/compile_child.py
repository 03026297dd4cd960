"""What the child process that compiles the layer runs: ``llama_layer`` (``engine.layer_maths``) traced with
symbolic sizes (rows T, cached positions S, buffer capacity C: one artifact for every row count and context
length) and compiled by inductor into fused C++ kernels (``torch._inductor.standalone_compile``), saved where
the parent asked, once it computes what the eager layer computes (``checked``, on this module's example
arguments). The parent (``engine.compiled``) starts it with a time limit, loads what it saved and checks it again.

This module is part of the compiled artifact's cache key (``compiled.source_key``): its tracing sizes, example
arguments and compiler options make the compiled code. Keep here only what the child runs.

Shape legend: T new rows, S cached + new positions, C the cache buffer's capacity, H hidden size,
G key/value heads, D head size.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path
from typing import Callable

import torch

from . import lowbit
from .kernels import PACKED_ROWS
from .layer_maths import LayerShape, llama_layer, weight_arguments

TRACE_ROWS, TRACE_PAST, TRACE_CAPACITY = 7, 113, 251  # example sizes equal to no model dimension (see compile_layer)


def example_arguments(shape: LayerShape, rows: int, past: int, capacity: int, generator=None):
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


def example_weights(shape: LayerShape, generator=None) -> list[torch.Tensor]:
    """Random weights of ``shape``'s layer in its family's form, ordered as ``weight_arguments``. Every one a
    tensor of its own: a graph traced with one object in two places reads the first for both."""
    dtype = getattr(torch, shape.dtype)
    outs = [(shape.heads + 2 * shape.kv_heads) * shape.head_dim, shape.hidden, 2 * shape.inner, shape.hidden]
    ins = [shape.hidden, shape.heads * shape.head_dim, shape.hidden, shape.inner]
    dense = [torch.randn(o, i, generator=generator) * i ** -0.5 for o, i in zip(outs, ins)]
    if shape.family in lowbit.KERNEL_FAMILIES:  # the family's own tensors, never a timing's choice
        # (``lowbit.choose``): a busy child once chose the de-quantised product, failed this compile and marked it
        # failed for good
        products = [lowbit.rounded_tensors(shape.family, w, dtype) for w in dense]
    elif shape.family == "onednn":
        products = [(torch.ops.mkldnn._reorder_linear_weight(w.to(dtype), PACKED_ROWS["onednn-8"]),) for w in dense]
    else:
        products = [(w.to(dtype),) for w in dense]
    norms = [1 + 0.1 * torch.randn(shape.hidden, generator=generator, dtype=dtype) for _ in range(2)]
    biases = [0.1 * torch.randn(o, generator=generator, dtype=dtype) for o in outs]
    return list(weight_arguments(shape, products, norms, biases))


def checked(shape: LayerShape, step: Callable) -> Callable:
    """``step`` if it computes what ``llama_layer`` computes eagerly (one row and four, over a past, with
    random weights), cache writes included; else an error. Run on a new artifact here, in the child, and on every
    load in the parent (``engine.compiled``)."""
    generator = torch.Generator().manual_seed(0)
    dtype = getattr(torch, shape.dtype)
    weights = example_weights(shape, generator)
    tolerance = 1e-4 if dtype == torch.float32 else 5e-2
    with torch.inference_mode():
        for rows, past in ((1, 9), (4, 5), (12, 3)):
            args = example_arguments(shape, rows, past, 32, generator)
            mine = [a.clone() for a in args]
            expected = llama_layer(shape, *args, *weights)
            got = step(*mine, *weights)
            error = float((got.float() - expected.float()).abs().max())
            cache_error = max(float((mine[i] - args[i]).abs().max()) for i in (1, 2))
            if not error <= tolerance * max(1.0, float(expected.abs().max())) or not cache_error <= tolerance:
                raise RuntimeError(f"the compiled layer disagrees with the eager one ({rows} rows: {error:.2g})")
    return step


def first_output(out):
    """A compiled graph's one output (the artifact's public call returns a list)."""
    return out[0] if isinstance(out, (list, tuple)) else out


def compile_layer(shape: LayerShape, path: Path) -> None:
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
    inputs = example_arguments(shape, TRACE_ROWS, TRACE_PAST, TRACE_CAPACITY) + example_weights(shape)
    with torch.inference_mode():
        graph = make_fx(functools.partial(llama_layer, shape), tracing_mode="symbolic")(*inputs)
    artifact = torch._inductor.standalone_compile(graph, inputs, dynamic_shapes="from_graph", options={"config_patches": {
        "cpp.enable_kernel_profile": True,  # the fused kernels show in torch.profiler (explorer profile)
        # no size and alignment checks on every call (≈ 20 a layer, 2 µs each here): the caller
        # (FusedLlamaLayer) hands over what the trace saw, and the check after loading runs each shape class
        "size_asserts": False, "alignment_asserts": False,
        "cpp_wrapper": True}})  # the per-call glue (allocations, kernel calls) in C++ too, not Python
    # checked here first: a wrong kernel can abort the process that runs it (an index check failing inside an
    # OpenMP region calls std::terminate, as a wrong shape function did on 2026-11-28), and this one is the child
    checked(shape, lambda *args: first_output(artifact(*args)))
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    artifact.save(path=str(temporary), format="binary")
    os.replace(temporary, path)


def main() -> None:
    """The child process ``compiled`` starts: ``python -c "…compile_child import main; main()" SHAPE_JSON PATH``."""
    compile_layer(LayerShape(**json.loads(sys.argv[1])), Path(sys.argv[2]))
