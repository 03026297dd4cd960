"""Long jobs (a decode, a race, the audits, the theory lab, the sweeps, a measured what-if): one way to stop
them, and the work they do held to the configured concurrency.

Gradio frees a job's concurrency slot the moment its client cancels or goes away, but it cannot interrupt
Python running in the job's thread: a job that computed for minutes between two checks ran on, on a core
already given to someone else (the probe of issue 28: a cancelled beam search held a core for 15 minutes,
three decodes ran under a limit of two). So:

- a generator job (decode, race, the API's ``decode``) computes only between two yields, and ``gated`` holds
  a ``WORK`` slot exactly then: one that Gradio stops resuming holds none, and one still computing when it
  is cancelled keeps its slot until it reaches its next yield (within one round; beam search yields between
  its steps), so the next job waits for it;
- any other job holds a slot for the whole of its work (``WORK.slot()``) and asks ``stopped(session)`` at
  least once per run: true once the page that started it was closed (``demo.unload`` → ``close``).

``WORK`` counts the jobs computing at once (``busy``, ``most``) and the generator jobs under way (``running``:
computing, between two steps or waiting for a slot) for the tests and the soak.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections import OrderedDict

DECODE_CONCURRENCY = int(os.environ.get("EXPLORER_DECODE_CONCURRENCY", "2"))
REMEMBERED_CLOSED = 4096  # closed pages remembered (their ids are never reused; a bound keeps memory flat)


class Work:
    """A semaphore of ``slots`` that also counts how many hold it now and at most, and how many generator jobs
    are under way (``running``: from their first step to their end, whether they hold a slot or not)."""

    def __init__(self, slots: int):
        self.slots = max(1, slots)
        self._semaphore = threading.BoundedSemaphore(self.slots)
        self._lock = threading.Lock()
        self.busy = self.most = self.running = 0

    @contextlib.contextmanager
    def slot(self):
        self._semaphore.acquire()
        with self._lock:
            self.busy += 1
            self.most = max(self.most, self.busy)
        try:
            yield
        finally:
            with self._lock:
                self.busy -= 1
            self._semaphore.release()

    @contextlib.contextmanager
    def job(self):
        """A generator job under way (``running``), from its first step to its end."""
        with self._lock:
            self.running += 1
        try:
            yield
        finally:
            with self._lock:
                self.running -= 1


WORK = Work(DECODE_CONCURRENCY)


def gated(handler):
    """A generator handler whose computing (each resumption up to its next yield) holds a ``WORK`` slot.
    The signature is the handler's own, so Gradio injects its request and progress as before."""

    @functools.wraps(handler)
    def run(*args, **kwargs):
        with WORK.job():
            steps = handler(*args, **kwargs)
            try:
                while True:
                    with WORK.slot():
                        try:
                            item = next(steps)
                        except StopIteration:
                            return
                    yield item
            finally:
                steps.close()  # a generator Gradio dropped: its own finally blocks run now (Stop bookkeeping, …)

    return run


_closed: "OrderedDict[str, None]" = OrderedDict()
_closed_lock = threading.Lock()


def close(session: str) -> None:
    """The page of ``session`` was closed: its jobs stop at their next check."""
    with _closed_lock:
        _closed[session] = None
        while len(_closed) > REMEMBERED_CLOSED:
            _closed.popitem(last=False)


def stopped(session: str) -> bool:
    """Whether the job of ``session`` should stop now (its page is gone)."""
    with _closed_lock:
        return session in _closed
