"""CUDA graphs for the forwards decoding repeats: a stack of decoder layers over T ≤ ``MAX_ROWS`` new rows,
captured once per (layers, T, KV buffers) and replayed.

Why: on a GPU a small model's forward is bound by kernel launches, not by arithmetic or bytes. The default
model's one-token forward is 30 layers × ≈ 15 kernels, each launched from Python in tens of µs while the GPU
runs it in a few (H100, 2026-11-23: our ``ar`` 32.9 tokens/s, ≈ 30 ms a step for 270 MB of weights that the
card reads in 0.1 ms; T(6)/T(1) = 1.14). A CUDA graph records the kernels of one forward once and replays
them all with one launch.

How, as gpt-fast does it: a graph bakes in every tensor's address and shape, so
- each layer's KV cache is a buffer of fixed capacity C (the cache's own ``GrowingLayer`` buffer, zeroed and
  sized to ``CAPACITY`` positions, doubled when a context outgrows it), written at the new rows' positions
  (``index_copy_`` at ``slots``) and read whole under a mask that hides every position after each row's
  own: the keys of rejected drafts stay in the buffer, unseen, until the next round overwrites them;
- the new rows' hidden states, rotary tables and positions are copied into the graph's static inputs before
  a replay, and its output is copied out after;
- one graph per (layers, T, the buffers' addresses, chain or tree): T from 1 to ``MAX_ROWS`` covers a
  verification of γ + 1 tokens, a token tree of up to ``MAX_ROWS`` nodes and a draft's one-row step; a chain
  builds its position mask inside the graph, a tree's mask (its ancestors, ``engine.tree``) is one more static
  input, and its positions are in the rotary tables already; longer inputs (the prompt) run eagerly into the
  same buffers, so every path sees one cache;
- a graphed forward's few-row products split their inputs where that measured faster on the card
  (``engine.split_products``);
- what a graph records is ``engine.static_stack``: the layers' arithmetic in about half the kernels of the
  model's own forward (H200, 2026-11-28: a one-row forward 3.8 → 2.6 ms).
Off CUDA nothing here runs (``static_on_cpu`` runs the same static-buffer stack eagerly on the CPU, for the
tests). ``EXPLORER_CUDA_GRAPHS=0`` turns graphs off; a capture that fails says why once, and that stack
decodes eagerly from then on.

Shape legend: T new rows, C buffer capacity, H hidden size, N query heads, G key/value heads, D head size.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import OrderedDict

import torch

from ..errors import one_line
from .cache import GrowingLayer, cache_layer
from .fused_layer import FusedLlamaLayer
from . import static_stack
from .kernels import say
from .switches import ThreadSwitch
from . import split_products
from .split_products import choose

MAX_ROWS = 48  # rows a graphed forward takes: a verification of up to 47 drafts, a BiTA pass (40 rows on the
# default model), a draft's one-row step
CAPACITY = 1024  # positions a graphed layer's KV buffer holds at first (doubled as a context needs)
MAX_GRAPHS = 96  # graphs kept per stack of layers (least recently replayed dropped first)

_LOCK = threading.RLock()  # one capture or replay at a time: graphs of a model share their memory pool
_GRAPHS: "weakref.WeakKeyDictionary[torch.nn.Module, OrderedDict]" = weakref.WeakKeyDictionary()
_POOLS: "weakref.WeakKeyDictionary[torch.nn.Module, object]" = weakref.WeakKeyDictionary()
_FAILED: "weakref.WeakKeyDictionary[torch.nn.Module, str]" = weakref.WeakKeyDictionary()
_FREE: "weakref.WeakKeyDictionary[torch.nn.Module, dict]" = weakref.WeakKeyDictionary()  # layer → shape → free pairs
FREE_PAIRS = 4  # KV buffer pairs a layer keeps for later decodes, per shape (decodes at once beyond it allocate)
_STATIC_ON_CPU = ThreadSwitch()
COUNTS = {"captured": 0, "capture_s": 0.0, "replayed": 0, "static": 0}  # "static": CPU runs (tests)


def enabled() -> bool:
    """``EXPLORER_CUDA_GRAPHS`` (read at every call, so one process can compare): on unless 0/false/no/off."""
    return os.environ.get("EXPLORER_CUDA_GRAPHS", "1").strip().lower() not in ("0", "false", "no", "off")


def static_on_cpu():
    """Inside this block (this thread), CPU forwards of T ≤ ``MAX_ROWS`` rows run the graphs' static-buffer
    stack eagerly: the same arithmetic a graph replays (whole-buffer attention under a position mask, writes
    at ``slots``), checked against the eager path by the tests on a machine without CUDA."""
    return _STATIC_ON_CPU.block()


def status() -> str:
    """In words, for reports: how many graphs were captured (and in how long), how many replays."""
    if not COUNTS["captured"] and not _FAILED:
        return "off" if not enabled() else "none captured"
    failed = f"; eager after a failed capture: {next(iter(_FAILED.values()))}" if len(_FAILED) else ""
    return (f"{COUNTS['captured']} captured in {COUNTS['capture_s']:.1f} s, "
            f"{COUNTS['replayed']} replays{failed}")


def graphable(layer: torch.nn.Module) -> bool:
    """A layer this module can run over static buffers: a plain Llama layer or its fused form."""
    return isinstance(layer, FusedLlamaLayer) or FusedLlamaLayer.fits(layer)


def run(layers, hidden: torch.Tensor, past: int, rotary, cache, tree_mask: torch.Tensor | None = None
        ) -> torch.Tensor | None:
    """``layers`` over (1, T, H) after ``past`` cached positions through a replayed graph (CUDA) or the static
    stack (``static_on_cpu``), the cache's views extended over the rows written; None when this does not
    apply (the caller then runs the layers eagerly). ``tree_mask`` (1, 1, T, past + T) additive: a token tree's
    rows, each seeing the context and its ancestors (``rotary`` then holds the nodes' positions); None: a chain."""
    static = hidden.device.type == "cpu" and _STATIC_ON_CPU.on()
    t = hidden.shape[1]
    if not (hidden.is_cuda or static) or not enabled() or cache is None or hidden.shape[0] != 1 \
            or not 1 <= t <= MAX_ROWS or not layers or not all(graphable(layer) for layer in layers):
        return None
    first = layers[0]
    if first in _FAILED:
        return None
    with _LOCK:
        cached = [cache_layer(cache, _index(layer)) for layer in layers]
        if not all(isinstance(c, GrowingLayer) and c.get_seq_length() == past for c in cached):
            return None
        buffers = [_ready(c, layer, hidden, past + t) for c, layer in zip(cached, layers)]  # [(keys, values)]
        cos, sin = (r.contiguous() for r in rotary)  # (1, T, D) each
        slots = torch.arange(past, past + t, device=hidden.device)  # (T,)
        mask = None if tree_mask is None else _whole_buffer_mask(tree_mask, buffers[0][0].shape[2])
        if static:
            out = static_stack.stack(layers, buffers, hidden, cos, sin, slots, mask)
            COUNTS["static"] += 1
        else:
            out = _replay(first, layers, buffers, hidden, cos, sin, slots, mask)
            if out is None:
                return None
        for c in cached:
            c.advance(t)
        return out


def _whole_buffer_mask(tree_mask: torch.Tensor, capacity: int) -> torch.Tensor:
    """A tree's additive mask (1, 1, T, S + T) over the whole buffer: (T, C), every position past S + T hidden."""
    t, seen = tree_mask.shape[-2:]
    mask = tree_mask.new_full((t, capacity), torch.finfo(tree_mask.dtype).min)
    mask[:, :seen] = tree_mask[0, 0]
    return mask


def _index(layer: torch.nn.Module) -> int:
    return layer.layer_idx if isinstance(layer, FusedLlamaLayer) else layer.self_attn.layer_idx


def _ready(cached: GrowingLayer, layer, like: torch.Tensor, need: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``cached``'s key and value buffers (1, G, C, D), zeroed where unwritten and holding ``need`` positions:
    the whole buffer is read under a mask, and 0 · NaN from never-written memory would be NaN. A buffer this
    made before is used as it is while it has room; any other is copied into a new one."""
    keys = cached._key_buffer if cached.is_initialized and hasattr(cached, "_key_buffer") else None
    if keys is not None and getattr(cached, "_graph_buffer", None) == keys.data_ptr() \
            and cached.keys.data_ptr() == keys.data_ptr() and cached.values.data_ptr() == cached._value_buffer.data_ptr() \
            and need <= keys.shape[2]:
        return keys, cached._value_buffer
    g, d = static_stack.kv_shape(layer)
    capacity = CAPACITY
    while capacity < need:
        capacity *= 2
    past = cached.get_seq_length()
    fresh = _take(layer, like, (1, g, capacity, d))  # keys, values (1, G, C, D), zeroed
    weakref.finalize(cached, _give, layer, fresh)  # back to the pool when this cache is gone
    if past:
        fresh[0][:, :, :past] = cached.keys
        fresh[1][:, :, :past] = cached.values
    if not cached.is_initialized:
        cached.lazy_initialization(fresh[0], fresh[1])
    cached._key_buffer, cached._value_buffer = fresh
    cached.keys, cached.values = fresh[0][:, :, :past], fresh[1][:, :, :past]
    cached._graph_buffer = fresh[0].data_ptr()
    return fresh[0], fresh[1]


def _take(layer, like: torch.Tensor, shape: tuple[int, ...]) -> list[torch.Tensor]:
    """A zeroed (keys, values) pair of ``shape`` for ``layer``: one a finished decode gave back where there is
    one, else new. Why: a graph bakes in its buffers' addresses, so a decode on new buffers captures every
    graph again (H100, 2026-11-27: 534 captures, 23.8 s of a 118 s benchmark, charged to the runs that paid
    them); on the buffers of the last decode, the graphs it captured replay."""
    with _LOCK:
        free = _FREE.setdefault(layer, {}).get((shape, like.dtype, like.device), [])
        if free:
            pair = free.pop()
            for buffer in pair:
                buffer.zero_()  # read whole under a mask: old finite keys weigh 0, but 0 · NaN would be NaN
            return pair
    return [like.new_zeros(shape) for _ in range(2)]


def _give(layer, pair: list[torch.Tensor]) -> None:
    """``pair`` back to ``layer``'s pool (a cache that held it is gone), at most ``FREE_PAIRS`` kept."""
    with _LOCK:
        free = _FREE.setdefault(layer, {}).setdefault((tuple(pair[0].shape), pair[0].dtype, pair[0].device), [])
        if len(free) < FREE_PAIRS:
            free.append(pair)


class _Graph:
    """One captured stack: static inputs, the graph, its output."""

    def __init__(self, layers, buffers, hidden, cos, sin, slots, mask, pool):
        self.hidden, self.cos, self.sin, self.slots = (x.clone() for x in (hidden, cos, sin, slots))
        self.mask = None if mask is None else mask.clone()  # a tree's (T, C); a chain's is made inside
        # one eager run on a side stream first (what capture needs: cuBLAS's workspaces, lazy state); it
        # computes this very step, so the keys it writes are the ones the replay writes again
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            static_stack.stack(layers, buffers, self.hidden, self.cos, self.sin, self.slots, self.mask)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool, capture_error_mode="thread_local"):
            self.out = static_stack.stack(layers, buffers, self.hidden, self.cos, self.sin, self.slots, self.mask)

    def replay(self, hidden, cos, sin, slots, mask) -> torch.Tensor:
        self.hidden.copy_(hidden)
        self.cos.copy_(cos)
        self.sin.copy_(sin)
        self.slots.copy_(slots)
        if mask is not None:
            self.mask.copy_(mask)
        self.graph.replay()
        return self.out.clone()


def _replay(first, layers, buffers, hidden, cos, sin, slots, mask) -> torch.Tensor | None:
    """The graph for this (layers, T, buffers, chain or tree), captured on first use; None after a failed capture."""
    key = (tuple(id(layer) for layer in layers), hidden.shape[1], hidden.dtype,
           tuple(b.data_ptr() for pair in buffers for b in pair), buffers[0][0].shape[2], mask is None,
           split_products.FORCED, static_stack.generation())
    graphs = _GRAPHS.setdefault(first, OrderedDict())
    graph = graphs.get(key)
    if graph is None:
        try:
            started = time.perf_counter()
            pool = _POOLS.get(first)
            if pool is None:
                pool = _POOLS[first] = torch.cuda.graph_pool_handle()
            choose([p for layer in layers for p in static_stack.products(layer)], hidden.shape[1])
            graph = _Graph(layers, buffers, hidden, cos, sin, slots, mask, pool)
            COUNTS["captured"] += 1
            COUNTS["capture_s"] += time.perf_counter() - started
        except Exception as err:  # noqa: BLE001 — any failure leaves this stack eager, said once
            _FAILED[first] = one_line(err, 160)
            say(f"note: CUDA graphs are off for this model ({_FAILED[first]}); it decodes eagerly")
            return None
        graphs[key] = graph
        while len(graphs) > MAX_GRAPHS:
            graphs.popitem(last=False)
    else:
        graphs.move_to_end(key)
    COUNTS["replayed"] += 1
    return graph.replay(hidden, cos, sin, slots, mask)
