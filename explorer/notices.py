"""One-time work announced where people wait: the model's conversion, the choice of this CPU's kernels, the compiled
layer, the 4-bit copy's build.

Each takes seconds to a minute, once per machine or process, and used to be said only on the server's terminal:
on an empty cache the page showed "Loading default and encoding the prompt…" for 65 s while only the terminal said
why (#48). ``announce`` still writes the line to stderr, and also keeps it (with when it was said), so that a page
waiting for a run can show what the machine is doing now (``since``). The work is shared by every session (one
conversion, one compile), so every waiting page may show it.

A leaf: imports nothing of the project.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque

KEPT = 64  # the newest lines kept: a page shows the latest one said while it waits

_lines: deque[tuple[float, str]] = deque(maxlen=KEPT)
_lock = threading.Lock()


def announce(line: str) -> None:
    """Say ``line`` on stderr (the CLI's output and the page stay clean of it) and keep it for waiting pages."""
    print(line, file=sys.stderr, flush=True)
    with _lock:
        _lines.append((time.monotonic(), line.strip()))


def since(moment: float) -> list[tuple[float, str]]:
    """The lines announced after ``moment`` (``time.monotonic()``), oldest first, each with when it was said."""
    with _lock:
        return [(at, line) for at, line in _lines if at >= moment]
