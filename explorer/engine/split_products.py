"""A graphed forward's few-row float32 products on CUDA, with their inputs split in chunks where that is faster
on the card at hand (split-K), chosen by measuring each (rows, shape) once.

Why: a verification of 2–32 rows should cost what one row costs on a GPU that is bound by launches, but it did not
(H100, float32, 2026-11-27, ``tools/gpu_profile.py``): from 7 rows on, cuBLAS runs a decoder layer's products as
GEMMs of 32×128-row tiles, 52 µs each where the one-row product takes 3.65 µs. With O ≤ 3 072 outputs that is at
most 24 tiles for a card of 132 multiprocessors, each walking all I inputs by itself: T(16)/T(1) = 2.17. Split
the I inputs in S chunks and the same product is S independent products of (T × I/S)·(I/S × O), run side by
side as one batched product, then one sum of the S partial results: the arithmetic is the product's own, added in
another order (float32 rounding, as any other kernel choice; ``tools/gpu_check.py`` checks greedy output against
plain decoding on the card).

Which S is fastest depends on the card, the shape and the rows, so nothing is assumed: the first graphed forward
of T rows times every candidate for each of its products (a CUDA graph of ``REPS`` calls, replayed, by CUDA
events) and keeps the fastest, S = 1 (the plain product) included. Off CUDA, or outside float32, or for one row,
the plain product runs.

Shape legend: T rows, I input features, O output features, S chunks.
"""

from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

from ..errors import one_line
from .kernels import say

ROWS = 0  # a candidate beside the chunk counts: each row its own one-row product (``split_product``)
CANDIDATES = (1, 2, 4, 8, 16, ROWS)  # tried: chunks (those that divide I into ≥ 32 features each), rows apart
REPS = 16  # calls per timed graph: one call is a few µs, below what a CUDA event resolves well
_CHOICES: dict[tuple, int] = {}  # (T, O, I, dtype, device) -> S
_FAILED: list[str] = []  # why a timing failed, once
FORCED: int | None = None  # one S for every product of > 1 row that it divides, on any device (the CPU tests)


def split_product(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, splits: int) -> torch.Tensor:
    """``x Wᵀ (+ b)`` for x (T, I) and W (O, I), with the I inputs in ``splits`` chunks: Σₛ x[:, s] W[:, s]ᵀ as
    one batched product (S, T, I/S)·(S, I/S, O) and a sum over S; both operands are strided views (no copy).
    ``splits`` = ``ROWS``: each row times W by itself, T one-row products (what a one-row step runs) in one batched
    call over the same W (batch stride 0, no copy), where the card's few-row kernels are slower than T of them."""
    if splits == 1:
        return F.linear(x, weight, bias)
    if splits == ROWS:
        t = x.shape[0]
        out = torch.bmm(x[:, None, :], weight.t()[None].expand(t, -1, -1))[:, 0]  # (T, 1, I)·(T, I, O) -> (T, O)
        return out if bias is None else out + bias
    t, i = x.shape
    o, chunk = weight.shape[0], i // splits
    parts = torch.bmm(x.view(t, splits, chunk).transpose(0, 1), weight.view(o, splits, chunk).permute(1, 2, 0))
    out = parts.sum(0)  # (T, O)
    return out if bias is None else out + bias


def weight_and_bias(module) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """(W, b) of a dense product module (the fast view's ``KernelLinear`` or an ``nn.Linear``); None for any
    other (a low-bit copy's products keep their own kernels)."""
    if isinstance(module, torch.nn.Linear):
        return module.weight, module.bias
    dense = getattr(module, "dense", None)
    if isinstance(dense, torch.Tensor) and dense.dim() == 2 and dense.shape[0] == getattr(module, "out_features", -1):
        return dense, getattr(module, "bias_tensor", None)
    return None


def _key(t: int, weight: torch.Tensor) -> tuple:
    return (t, *weight.shape, weight.dtype, weight.device)


def applies(t: int, weight: torch.Tensor) -> bool:
    """Whether a choice is measured for T rows of this weight: float32 on CUDA, more than one row."""
    return t > 1 and weight.is_cuda and weight.dtype == torch.float32


def product(module, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
    """``module(x)`` for x (1, T, I), through the split this (T, shape) measured fastest where one was chosen;
    with ``residual`` (1, T, O), ``residual + module(x)``, added into ``residual`` itself (which the caller
    gives up) inside the product where it is a plain one: one kernel where a product and an add were two."""
    parts = weight_and_bias(module)
    t = x.shape[-2]
    splits = 1 if parts is None else _CHOICES.get(_key(t, parts[0]), 1)
    if FORCED is not None and FORCED != 1 and parts is not None and t > 1 \
            and (FORCED == ROWS or parts[0].shape[1] % FORCED == 0):
        splits = FORCED
    if residual is not None and parts is not None and splits == 1 and parts[1] is None \
            and residual.is_contiguous() and residual.dtype == parts[0].dtype:
        flat = residual.view(t, -1)
        flat.addmm_(x.reshape(t, -1), parts[0].t())
        return residual
    if splits == 1:
        out = module(x)
    else:
        out = split_product(x.reshape(t, -1), *parts, splits)[None]
    return out if residual is None else residual.add_(out)


def choose(modules, t: int) -> None:
    """Measure, once per (T, shape), which split runs ``modules``' products of T rows fastest on this card.
    Call outside a graph capture (it captures graphs of its own)."""
    for module in modules:
        parts = weight_and_bias(module)
        if parts is None or not applies(t, parts[0]) or _key(t, parts[0]) in _CHOICES:
            continue
        weight, bias = parts
        x = torch.randn(t, weight.shape[1], device=weight.device, dtype=weight.dtype)
        try:
            timed = {s: _time(x, weight, bias, s) for s in CANDIDATES if s == ROWS or (weight.shape[1] % s == 0
                     and weight.shape[1] // s >= 32)}
        except Exception as err:  # noqa: BLE001 — a timing that fails leaves the plain product, said once
            if not _FAILED:
                _FAILED.append(one_line(err, 160))
                say(f"note: split products not measured ({_FAILED[0]}); the plain products run")
            timed = {1: 0.0}
        _CHOICES[_key(t, weight)] = min(timed, key=timed.get)


def _time(x, weight, bias, splits) -> float:
    """Median µs of one call (a graph of ``REPS`` calls, replayed 5 times after a warm-up)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        split_product(x, weight, bias, splits)  # cuBLAS's workspace and lazy state, before the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(REPS):
            split_product(x, weight, bias, splits)
    graph.replay()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / REPS)
    return statistics.median(times)


def choices() -> list[dict]:
    """What was chosen, for reports: one row per (T, O, I); ``ROWS`` said as "rows apart"."""
    return [{"rows": t, "out": o, "in": i, "splits": "rows apart" if s == ROWS else s} for (t, o, i, _, _), s in sorted(
        _CHOICES.items(), key=lambda kv: kv[0][:3])]
