"""The default progress report of long jobs (benchmark, trainers): one line per step on stderr, and the time left
in words from the measured pace."""

from __future__ import annotations

import sys


def print_progress(done: int, total: int, line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def time_left(seconds: float) -> str:
    """A wait in words from the measured pace ("about 40 s left", "about 3 min left", "about 1 h 5 min left"):
    rounded, since it is an estimate that the next step corrects."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"about {max(5, round(seconds / 5) * 5)} s left"
    minutes = round(seconds / 60)
    return f"about {minutes} min left" if minutes < 60 else f"about {minutes // 60} h {minutes % 60} min left"
