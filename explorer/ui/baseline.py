"""The autoregressive baseline a run is compared with: decoded once per (model, prompt, sampling
settings, max_new_tokens, seed) and cached for the process (shared by every session) — while the
machine runs at the speed it ran at then.

A ratio against plain decoding measured on a quiet CPU says nothing about a run on a loaded one (the
page once showed ×0.13 for a run the race, which interleaves, measured at ×1.32). So every baseline keeps
what a fixed piece of work cost when it was measured (``machine_speed_ms``), and a run uses it only if
the same work costs about the same now (within ``SPEED_TOLERANCE``); otherwise the page re-measures plain
decoding right after the run and says why.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import torch

import explorer

CAPACITY = 128
# the machine may be this much faster or slower before a cached baseline is stale: on a quiet 2-core EPYC the
# test's own spread is 1.3× (1.43–1.88 ms) while one busy process on the other core makes it 3.5× slower and
# plain decoding 2.6× (50 → 19 tokens/s), two 3.7× and 4×
SPEED_TOLERANCE = 1.5
PROBE_SHAPE = (576, 1536)  # one of the default model's MLP projections (hidden 576 → 1536)
PROBE_LAYERS = 4  # four such weights: 14 MB, the size a one-token forward streams through in a few layers
PROBE_REPEATS = 7
PROBE_ROWS = 32  # enough rows that the product is split over every thread, as a decode's forwards are


@dataclass(frozen=True)
class Baseline:
    trace: object  # a finished ``ar`` RunTrace
    speed_ms: float | None  # ``machine_speed_ms()`` when it was measured (None: not known)
    at: float  # time.time() when it was stored


_PROBE: list[torch.Tensor] = []


def machine_speed_ms() -> float:
    """What a fixed piece of work costs on this machine now, in ms (median of 7): 32 rows through four
    576 × 1536 weights, split over the threads as a forward is. A decode on another session or process
    makes it slower about as much as it makes a decode slower; ≈ 1.6 ms here (11 ms in all), so it runs at
    every run's start and end."""
    if not _PROBE:
        generator = torch.Generator().manual_seed(0)
        _PROBE.extend(torch.randn(PROBE_SHAPE, generator=generator) for _ in range(PROBE_LAYERS))
        _PROBE.append(torch.randn(PROBE_ROWS, PROBE_SHAPE[0], generator=generator))
    *weights, row = _PROBE
    times = []
    with torch.inference_mode():
        for _ in range(PROBE_REPEATS):
            start = time.perf_counter()
            for w in weights:
                (row @ w).sum()
            times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def baseline_key(trace) -> tuple:
    """What makes two runs comparable: same model in the same dtype on the same device (a ZeroGPU Space runs
    both), prompt tokens, sampling settings, length and seed."""
    s = trace.settings
    return (trace.model, trace.dtype, trace.device, tuple(trace.prompt_ids), s.temperature, s.top_k, s.top_p,
            s.max_new_tokens, s.seed)


def _ago(seconds: float) -> str:
    return "just now" if seconds < 60 else f"{seconds / 60:.0f} min ago" if seconds < 5400 else f"{seconds / 3600:.0f} h ago"


class BaselineCache:
    """Completed ``ar`` traces by ``baseline_key`` (least recently used dropped past ``capacity``), each
    with the machine's speed when it was measured."""

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self._entries: OrderedDict[tuple, Baseline] = OrderedDict()
        self._lock = threading.Lock()

    def _entry(self, trace) -> Baseline | None:
        with self._lock:
            found = self._entries.get(baseline_key(trace))
            if found is not None:
                self._entries.move_to_end(baseline_key(trace))
            return found

    def get(self, trace):
        """The baseline for a trace's settings, whatever the machine's speed now (for a run already
        compared, an upload, "your runs"); an ``ar`` trace that ran to its end is its own."""
        if trace.method == "ar" and trace.summary.stop_reason != "stopped":
            return trace
        entry = self._entry(trace)
        return entry.trace if entry is not None else None

    def fresh(self, trace, speed_ms: float) -> tuple[object | None, str]:
        """(the baseline, if the machine runs at about the speed it ran at when it was measured; a
        sentence on which baseline a run is compared with, or why there is none yet)."""
        if trace.method == "ar" and trace.summary.stop_reason != "stopped":
            return trace, ""
        entry = self._entry(trace)
        if entry is None:
            return None, "Plain decoding has not run on these settings yet: it runs once, right after this run."
        ago = _ago(time.time() - entry.at)
        if entry.speed_ms is None:
            return entry.trace, f"Compared with plain decoding measured {ago} on these settings."
        change = speed_ms / entry.speed_ms
        if 1 / SPEED_TOLERANCE <= change <= SPEED_TOLERANCE:
            return entry.trace, (f"Compared with plain decoding measured {ago} on these settings, with the machine "
                                 f"at the same speed as now (a fixed test took {entry.speed_ms:.2f} ms then, "
                                 f"{speed_ms:.2f} ms now).")
        pace = f"{change:.1f}× slower" if change > 1 else f"{1 / change:.1f}× faster"
        return None, (f"The machine is {pace} than when plain decoding was measured {ago} (a fixed test took "
                      f"{entry.speed_ms:.2f} ms then, {speed_ms:.2f} ms now; another run or process shares the CPU, "
                      "or stopped sharing it): plain decoding is measured again right after this run.")

    def put(self, trace, speed_ms: float | None = None) -> None:
        """Keep a finished ``ar`` trace (a stopped one would understate nothing but the length: skip it)."""
        if trace.method != "ar" or trace.summary.stop_reason == "stopped":
            return
        with self._lock:
            self._entries[baseline_key(trace)] = Baseline(trace, speed_ms, time.time())
            self._entries.move_to_end(baseline_key(trace))
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)


def baseline_stream(trace) -> explorer.Decoding:
    """Start the autoregressive run on the same prompt tokens and settings as ``trace``."""
    s = trace.settings
    return explorer.stream(
        trace.model, prompt_ids=list(trace.prompt_ids), method="ar", temperature=s.temperature, top_k=s.top_k,
        top_p=s.top_p, max_new_tokens=s.max_new_tokens, seed=s.seed, chat=s.chat, dtype=trace.dtype,
        device=trace.device,
    )


BASELINES = BaselineCache()
