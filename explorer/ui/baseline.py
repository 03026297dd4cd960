"""The autoregressive baseline a run is compared with: decoded once per (model, prompt, sampling
settings, max_new_tokens, seed) and cached for the process (shared by every session)."""

from __future__ import annotations

import threading
from collections import OrderedDict

import explorer

CAPACITY = 128


def baseline_key(trace) -> tuple:
    """What makes two runs comparable: same model, prompt tokens, sampling settings, length and seed."""
    s = trace.settings
    return (trace.model, tuple(trace.prompt_ids), s.temperature, s.top_k, s.top_p, s.max_new_tokens, s.seed)


class BaselineCache:
    """Completed ``ar`` traces by ``baseline_key`` (least recently used dropped past ``capacity``)."""

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self._traces: OrderedDict[tuple, object] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, trace):
        """The baseline for a trace's settings; an ``ar`` trace that ran to its end is its own."""
        if trace.method == "ar" and trace.summary.stop_reason != "stopped":
            return trace
        with self._lock:
            found = self._traces.get(baseline_key(trace))
            if found is not None:
                self._traces.move_to_end(baseline_key(trace))
            return found

    def put(self, trace) -> None:
        """Keep a finished ``ar`` trace (a stopped one would understate nothing but the length: skip it)."""
        if trace.method != "ar" or trace.summary.stop_reason == "stopped":
            return
        with self._lock:
            self._traces[baseline_key(trace)] = trace
            self._traces.move_to_end(baseline_key(trace))
            while len(self._traces) > self.capacity:
                self._traces.popitem(last=False)


def baseline_stream(trace) -> explorer.Decoding:
    """Start the autoregressive run on the same prompt tokens and settings as ``trace``."""
    s = trace.settings
    return explorer.stream(
        trace.model, prompt_ids=list(trace.prompt_ids), method="ar", temperature=s.temperature, top_k=s.top_k,
        top_p=s.top_p, max_new_tokens=s.max_new_tokens, seed=s.seed, chat=s.chat,
    )


BASELINES = BaselineCache()
