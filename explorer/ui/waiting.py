"""A wait the page can see: blocking work (loading a model, a run's first round) done in a thread while the
handler tells the page, every half second, how long it has waited and what one-time work the machine is doing.

On an empty cache the first run sat on "Loading default and encoding the prompt…" for 65 s, the first
``quantized`` run for 18–37 s, while only the server's terminal said why (#48): the conversion, the choice of this
CPU's kernels, the compiled layer, the 4-bit copy's build (``explorer.notices``). The work runs in a thread because
the handler, a generator, can say nothing while a call blocks it; the handler keeps its job's slot while it waits
(``jobs.gated``: the thread computes for it), so no more work runs at once than the limit allows.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Callable, Generator

from explorer import notices

EVERY_S = 0.5  # how often the page hears from a wait
LOOK_BACK_S = 60.0  # an announcement this recent may be the work a wait is waiting for
# a server's folders are no visitor's business: "…once (≤ 10 s; kept in /root/.cache/…) …" loses its "kept in"
_WHERE = re.compile(r"[;,]? *(?:kept|cached) in [^)\n]*")


def for_the_page(line: str) -> str:
    """A one-time work's announcement as a visitor reads it: without the server's folders."""
    return re.sub(r"\(\s*\)", "", _WHERE.sub("", line)).replace("( …", "…").strip()


def waiting(work: Callable[[], object], say: Callable[[float, str | None], dict],
            every: float = EVERY_S) -> Generator[dict, None, object]:
    """Run ``work()`` in a thread; while it runs, yield ``say(seconds waited, the newest announcement or None)``
    every ``every`` seconds; then return its value (``value = yield from waiting(…)``), or raise its exception here.
    An announcement made up to ``LOOK_BACK_S`` before the wait began counts, with how long ago it was made (the
    server's own preload may have begun the conversion that this first run now waits for)."""
    started = time.monotonic()
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as err:  # handed to the handler, which words it
            outcome["error"] = err

    thread = threading.Thread(target=run, name="page-wait", daemon=True)
    thread.start()
    while True:
        thread.join(every)
        if not thread.is_alive():
            break
        said = notices.since(started - LOOK_BACK_S)
        if said:
            at, line = said[-1]
            ago = time.monotonic() - at
            said = for_the_page(line) + (f" (said {ago:.0f} s ago)" if ago >= 2 else "")
        yield say(time.monotonic() - started, said or None)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
