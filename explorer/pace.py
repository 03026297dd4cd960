"""The machine's pace while a run decodes: a fixed piece of work timed now and then, so that a ratio of two runs
measured at different moments can say whether the machine ran them alike.

A run and the plain decoding it is compared with run one after the other. On a shared machine (a public Space,
a 2-core CPU where other sessions decode) the load can change between them or during either, and then their
tokens/s say nothing about each other: the page printed "×21.21 plain decoding" and "T(1.1)/T(1) = 0.05" (#42),
a speed-up no run can have. The race (``explorer.race``) survives load by interleaving its lanes; a single run
cannot, but it can notice: ``PaceLog`` times the probe at a run's start, about every ``PROBE_EVERY_S`` between
rounds (off the timed path: round timings never include it) and at its end, and the trace keeps the samples
(``RunTrace.pace_ms``), so whoever compares two traces sees whether the pace held (``pace_change``).

A leaf: imports only the leaf ``limits`` (and torch only inside the probe, so the plots may import this module).
"""

from __future__ import annotations

import statistics
import time

from .limits import MAX_PACE_SAMPLES  # a longer run keeps every other sample, then probes half as often

# the pace may change this much before two runs stop being comparable: on a quiet 2-core EPYC the probe's own
# spread is 1.3× (1.43–1.88 ms) while one busy process on the other core makes it 3.5× slower and plain
# decoding 2.6× (50 → 19 tokens/s), two 3.7× and 4×
PACE_TOLERANCE = 1.5
PROBE_EVERY_S = 0.5  # ≈ 11 ms of probe each half second: about 2 % of the wall time and none of the rounds' time;
# a run of a second gets three samples, enough for a median
PROBE_SHAPE = (576, 1536)  # one of the default model's MLP projections (hidden 576 → 1536)
PROBE_LAYERS = 4  # four such weights: 14 MB, the size a one-token forward streams through in a few layers
PROBE_REPEATS = 7
PROBE_ROWS = 32  # enough rows that the product is split over every thread, as a decode's forwards are

_PROBE: list = []


def probe_ms() -> float:
    """What a fixed piece of work costs on this machine now, in ms (median of 7): 32 rows through four
    576 × 1536 weights, split over the threads as a forward is. A decode on another session or process makes
    it slower about as much as it makes a decode slower; ≈ 1.6 ms on a quiet 2-core machine (11 ms in all)."""
    import torch

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


class PaceLog:
    """The probe's samples over one run: ``take()`` between rounds (it probes once ``every_s`` has passed since
    the last sample, or at once with ``now=True``)."""

    def __init__(self, every_s: float = PROBE_EVERY_S):
        self.every_s = every_s
        self.samples: list[float] = []
        self._last = float("-inf")

    def take(self, now: bool = False) -> None:
        if not now and time.perf_counter() - self._last < self.every_s:
            return
        self.samples.append(round(probe_ms(), 3))
        self._last = time.perf_counter()
        if len(self.samples) >= MAX_PACE_SAMPLES:  # a long run: keep its whole span at half the density
            self.samples = self.samples[::2]
            self.every_s *= 2


def typical_pace(run) -> float | None:
    """A run's median probe time in ms (its samples lie about half a second apart, so this is the pace of most of
    its time); None without samples."""
    samples = sorted(s for s in run or () if s > 0)
    if not samples:
        return None
    middle = len(samples) // 2
    return samples[middle] if len(samples) % 2 else (samples[middle - 1] + samples[middle]) / 2


def pace_change(*runs) -> float:
    """How differently the machine ran ``runs`` (each a sequence of ``pace_ms``): the slowest run's typical probe ÷
    the quickest's (1.0 where fewer than two runs have samples). Medians, not single samples: load over most of a
    run moves its median and its ratio to another run alike (a ratio of ×21 came from plain decoding timed on a
    busy machine), while a brief burst does neither — such as the browser drawing a run's figures on the same
    CPU just as plain decoding starts (one probe at 23.6 ms, the next at 1.6)."""
    typical = [m for m in map(typical_pace, runs) if m is not None]
    return max(typical) / min(typical) if len(typical) >= 2 else 1.0
