"""The default progress report of long jobs (benchmark, trainers): one line per step on stderr, and the time left
in words from the measured pace."""

from __future__ import annotations

import sys
import time


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


def left_after(started: float, done: int, total: int) -> str:
    """The time left for a progress line, as " · about 3 min left", from the pace of the ``done`` steps of ``total``
    since ``started`` (a ``time.perf_counter()``); "" after the last step."""
    return f" · {time_left((time.perf_counter() - started) / done * (total - done))}" if 0 < done < total else ""
