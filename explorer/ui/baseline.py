"""The autoregressive baseline a run is compared with: decoded once per (model, prompt, sampling
settings, max_new_tokens, seed) and cached for the process (shared by every session) — while the
machine runs at the speed it ran at then.

A ratio against plain decoding measured on a quiet CPU says nothing about a run on a loaded one (the
page once showed ×0.13 for a run the race, which interleaves, measured at ×1.32). So every baseline keeps
what a fixed piece of work cost when it was measured (``pace.probe_ms``), and a run uses it only if
the same work costs about the same now (within ``PACE_TOLERANCE``); otherwise the page re-measures plain
decoding right after the run and says why. A baseline measured here records its pace as it decodes
(``Decoding.watch_pace``), as the run does, so a comparison can also tell when the pace changed during either
(``viz.trust``).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import explorer
from explorer.pace import PACE_TOLERANCE

CAPACITY = 128


@dataclass(frozen=True)
class Baseline:
    trace: object  # a finished ``ar`` RunTrace
    speed_ms: float | None  # ``pace.probe_ms()`` when it was measured (None: not known)
    at: float  # time.time() when it was stored


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
        if 1 / PACE_TOLERANCE <= change <= PACE_TOLERANCE:
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


class CompanionCache:
    """What stands beside a run on the page (``ui.comparing``: the 4-bit copy drafting and alone, raced with plain
    decoding), by (``baseline_key``, a name), with the machine's pace when it ran: like plain decoding, used only
    while the machine keeps that pace (``PACE_TOLERANCE``)."""

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self._entries: OrderedDict[tuple, Baseline] = OrderedDict()
        self._lock = threading.Lock()

    def fresh(self, run, name: str, speed_ms: float):
        """What was kept under ``name`` for ``run``'s prompt and settings, if the machine's pace is about what it was
        then; else None."""
        with self._lock:
            entry = self._entries.get((baseline_key(run), name))
        if entry is None or entry.speed_ms is None or not 1 / PACE_TOLERANCE <= speed_ms / entry.speed_ms <= PACE_TOLERANCE:
            return None
        return entry.trace

    def put(self, run, name: str, value, speed_ms: float | None) -> None:
        with self._lock:
            key = (baseline_key(run), name)
            self._entries[key] = Baseline(value, speed_ms, time.time())
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)


def baseline_stream(trace) -> explorer.Decoding:
    """Start the autoregressive run on the same prompt tokens and settings as ``trace``, recording the machine's
    pace as it decodes (a comparison needs it to know whether the two ran alike)."""
    s = trace.settings
    return explorer.stream(
        trace.model, prompt_ids=list(trace.prompt_ids), method="ar", temperature=s.temperature, top_k=s.top_k,
        top_p=s.top_p, max_new_tokens=s.max_new_tokens, seed=s.seed, chat=s.chat, dtype=trace.dtype,
        device=trace.device,
    ).watch_pace()


BASELINES = BaselineCache()
COMPANIONS = CompanionCache()
