"""The default progress report of long jobs (benchmark, trainers): one line per step on stderr."""

from __future__ import annotations

import sys


def print_progress(done: int, total: int, line: str) -> None:
    print(line, file=sys.stderr, flush=True)
