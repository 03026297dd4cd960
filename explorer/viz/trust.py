"""Whether a run's speed against plain decoding can be trusted, and if not, why, in plain words.

A run and its plain decoding are timed one after the other. When other work shares the machine between or
during them, their tokens/s stop describing the same machine and the ratio is anything: the page printed
"measured ×21.21 plain decoding" and "T(1.1)/T(1) = 0.05" on a busy 2-core machine (#42), figures no run can
have. So before any ratio is shown as a fact it must pass two checks:

- the machine ran both alike: the fixed test each trace timed as it decoded (``RunTrace.pace_ms``,
  ``explorer.pace``) took, typically (its median), no more than ``PACE_TOLERANCE`` times longer in one run than
  in the other;
- the ratio is possible: a lossless run emits only tokens a target pass verified, and a pass costs at least a
  plain step, so it cannot beat plain decoding by more than its tokens per target pass (with room for noise);
  and a verification of k tokens costs at least one plain forward and at most about k of them.

What fails is said instead of printed, with where a fair figure comes from: the race, whose lanes take turns
so that load falls on all of them alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..pace import PACE_TOLERANCE, pace_change, typical_pace

NOISE = 1.25  # timing noise a ratio may carry past what is possible before it is called impossible
VERIFY_NOISE = 0.5  # tokens' worth of room above k for a verification of k tokens (k one-token forwards' cost)
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
    change = pace_change(ours, theirs)
    if change > PACE_TOLERANCE:
        return Doubt(
            "the machine was busy while this run or its plain decoding ran; the race in Compare measures fairly",
            f"The machine was busy: a fixed test typically took {typical_pace(ours):.1f} ms while this run decoded and "
            f"{typical_pace(theirs):.1f} ms while plain decoding did ({change:.1f}× apart; other work shared the CPU), so "
            f"their ratio is unreliable and is not shown — {RACE}.")
    bound = trace.summary.tokens_per_target_forward
    if not trace.settings.lossy and bound and ratio > bound * NOISE:
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


def verify_ratio_doubt(ratio: float, tokens: float) -> str | None:
    """Why a measured T(k)/T(1) (one verification of ``tokens`` tokens against one plain forward) cannot be, in
    words; None when it can: a verification of more tokens costs at least one plain forward, and at most about
    as many as it has tokens."""
    if ratio < 1:
        return ("came out below one plain forward, which a verification of more tokens cannot cost: the run and "
                "plain decoding met different loads (or timing noise)")
    if ratio > max(tokens, 1) + VERIFY_NOISE:
        return (f"came out above what {tokens:.1f} one-token forwards would cost, more than a batched verification "
                "can: the run and plain decoding met different loads")
    return None
