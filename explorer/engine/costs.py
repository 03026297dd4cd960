"""The measured cost of a target forward as a function of how many new tokens it runs: T(n).

Verification runs K + 1 tokens in one forward. On a GPU that costs about one step; on this project's
2-core CPU a 2-token forward cost ≈ 1.6× a 1-token one through MKL's kernels and ≈ 1.1× on the fast path
(``engine.fast``), so a draft-length policy that knows T(n) can decide when drafting does not pay
(``cost-aware``, ``*-ts-priced``). Measured once per model and device per process, on a synthetic
context, medians of a few repeats with the sizes interleaved.
"""

from __future__ import annotations

import statistics
import time
import weakref

import torch

from .cache import CachedForward
from .forward import full_forward

# Per model (weakly: an evicted model's curves go with it, and a new model never inherits an old id's).
_CURVES: "weakref.WeakKeyDictionary[torch.nn.Module, dict[str, tuple[float, ...]]]" = weakref.WeakKeyDictionary()


def step_time(target, context: int = 128, repeats: int = 7) -> float:
    """Seconds of one uncontended one-token target forward: the fastest of ``repeats`` after ``context``
    cached tokens, once per model and process. What a draft step costing "c target steps" is priced
    against (the theory lab's synthetic draft): the fastest, not the median, so that another process busy
    on a core during these few forwards does not inflate every later run's c (a median of 5 once came out
    three times a quiet forward under the full test suite's load)."""
    curves = _CURVES.setdefault(target.model, {})
    key = f"{target.device}:step:{context}"
    if key not in curves:
        ids = [i % max(2, target.vocab_size - 1) + 1 for i in range(context + 1)]
        runner = CachedForward(full_forward(target.model), target.device)
        runner.logits(ids[:context], 1)
        sync = torch.cuda.synchronize if target.device.type == "cuda" else (lambda: None)
        times = []
        for _ in range(repeats + 1):
            runner.truncate(context)
            sync()
            start = time.perf_counter()
            runner.logits(ids, 1)
            sync()
            times.append(time.perf_counter() - start)
        curves[key] = (min(times[1:]),)
    return curves[key][0]


def verify_cost_curve(target, max_tokens: int = 17, context: int = 128, repeats: int = 5) -> tuple[float, ...]:
    """Seconds for one target forward of n = 1..max_tokens new tokens after ``context`` cached ones.

    Made non-decreasing (a running maximum of the medians): running more tokens never costs less, and a
    noisy dip would otherwise tempt a policy into drafts that do not pay.
    """
    curves = _CURVES.setdefault(target.model, {})
    key = f"{target.device}:{max_tokens}:{context}"
    if key in curves:
        return curves[key]
    ids = [i % max(2, target.vocab_size - 1) + 1 for i in range(context + max_tokens)]
    runner = CachedForward(full_forward(target.model), target.device)
    runner.logits(ids[:context], 1)  # the cached prefix, and a warm-up
    sync = torch.cuda.synchronize if target.device.type == "cuda" else (lambda: None)
    sizes = range(1, max_tokens + 1)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for rep in range(repeats + 1):  # the sizes interleaved, so a slow spell of the machine hits them all alike
        for n in sizes:
            runner.truncate(context)
            sync()
            start = time.perf_counter()
            runner.logits(ids[: context + n], n)
            sync()
            if rep:  # the first pass over the sizes is a warm-up (first calls of a shape allocate)
                times[n].append(time.perf_counter() - start)
    curve = []
    for n in sizes:
        curve.append(max([statistics.median(times[n])] + curve[-1:]))
    curves[key] = tuple(curve)
    curves[key + ":raw"] = tuple(statistics.median(times[n]) for n in sizes)
    return curves[key]


def raw_cost_curve(target, max_tokens: int = 17, context: int = 128) -> tuple[float, ...] | None:
    """The medians ``verify_cost_curve`` made its running maximum of (None before it ran): a report checks them
    (``explorer.ratios.curve_doubts``), since the maximum hides a T(1) that a busy spell slowed — every ratio
    then reads 1.00 (``bench --quick`` printed T(n)/T(1) 1.00 for every n, #48)."""
    return _CURVES.get(target.model, {}).get(f"{target.device}:{max_tokens}:{context}:raw")
