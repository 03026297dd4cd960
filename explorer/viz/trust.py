"""Whether a run's speed against plain decoding can be trusted, and if not, why, in plain words.

A run and its plain decoding are timed one after the other. When other work shares the machine between or
during them, their tokens/s stop describing the same machine and the ratio is anything: the page printed
"measured ×21.21 plain decoding" and "T(1.1)/T(1) = 0.05" on a busy 2-core machine (#42), figures no run can
have. The rule every ratio of times obeys (``explorer.ratios``: the pace held, the ratio is possible) applied to
two traces: the fixed test each trace timed as it decoded (``RunTrace.pace_ms``, ``explorer.pace``), and the
lossless bound of its tokens per target pass.

What fails is said instead of printed, with where a fair figure comes from: the race, whose lanes take turns
so that load falls on all of them alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..pace import typical_pace
from ..ratios import NOISE, VERIFY_NOISE, impossible_speedup, pace_moved, verify_ratio_doubt

__all__ = ["NOISE", "VERIFY_NOISE", "Doubt", "measured_speedup", "raw_speedup", "speedup_doubt", "verify_ratio_doubt"]
RACE = "the race (Compare tab) measures fairly: its lanes take turns, so any load falls on them alike"


@dataclass(frozen=True)
class Doubt:
    """Why a speed-up cannot be shown: ``short`` for a summary line, ``words`` for the explanation."""

    short: str
    words: str


def raw_speedup(trace, baseline) -> float | None:
    """This run's tokens/s ÷ the baseline's, trusted or not (None without both)."""
    if baseline is None or not trace.summary.tokens_per_s or not baseline.summary.tokens_per_s:
        return None
    return trace.summary.tokens_per_s / baseline.summary.tokens_per_s


def speedup_doubt(trace, baseline) -> Doubt | None:
    """Why this run's ratio to ``baseline`` cannot be trusted; None when it can, or when there is none."""
    ratio = raw_speedup(trace, baseline)
    if ratio is None or trace.method == "ar":
        return None
    ours, theirs = getattr(trace, "pace_ms", ()), getattr(baseline, "pace_ms", ())
    change = pace_moved(ours, theirs)
    if change is not None:
        return Doubt(
            "the machine was busy while this run or its plain decoding ran; the race in Compare measures fairly",
            f"The machine was busy: a fixed test typically took {typical_pace(ours):.1f} ms while this run decoded and "
            f"{typical_pace(theirs):.1f} ms while plain decoding did ({change:.1f}× apart; other work shared the CPU), so "
            f"their ratio is unreliable and is not shown — {RACE}.")
    bound = trace.summary.tokens_per_target_forward
    if impossible_speedup(ratio, bound, bool(trace.settings.lossy)) is not None:
        return Doubt(
            "faster than this run can be: the two were not timed alike; the race in Compare measures fairly",
            f"The two runs were not timed alike: with {bound:.2f} tokens per target pass, and a pass costing at least "
            "one plain step, this run cannot beat plain decoding by more than that, yet their clocks say it did "
            f"(another process, or this machine's own noise, slowed plain decoding) — {RACE}.")
    return None


def measured_speedup(trace, baseline) -> float | None:
    """This run's tokens/s ÷ the autoregressive baseline's (both over their whole runs), when it can be trusted
    (``speedup_doubt``); None otherwise or without a baseline."""
    return None if speedup_doubt(trace, baseline) is not None else raw_speedup(trace, baseline)
