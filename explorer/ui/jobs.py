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

Short requests come first (issue 51: two tabs' 2 000-run audits held both slots for ~40 minutes and another
client's one-token decode waited in the queue): a long job (``slot(long=True)``: the audits, the race, the theory
lab, the sweep, a measured what-if) never holds more than ``long_slots`` (all but one slot), takes a slot only
while no short request waits for one, and offers its slot back between two decodes (``Held.share``); long jobs
take the long slots in turn. Who may start a long job, and for how long, is ``long_jobs``'s.

``WORK`` counts the jobs computing at once (``busy``, ``most``) and the generator jobs under way (``running``:
computing, between two steps or waiting for a slot) for the tests and the soak.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import threading
from collections import OrderedDict

from explorer.api import loads_by

from .session import visitor_id

DECODE_CONCURRENCY = int(os.environ.get("EXPLORER_DECODE_CONCURRENCY", "2"))
REMEMBERED_CLOSED = 4096  # closed pages remembered (their ids are never reused; a bound keeps memory flat)


class Work:
    """``slots`` that count how many hold them now and at most, and how many generator jobs are under way
    (``running``: from their first step to their end, whether they hold a slot or not). A long job holds at most
    ``long_slots`` of them and waits while a short request waits; long jobs are served in the order they asked."""

    def __init__(self, slots: int):
        self.slots = max(1, slots)
        self.long_slots = max(1, self.slots - 1)  # one slot is always left to short requests (where there are two)
        self._cond = threading.Condition()
        self._lock = threading.Lock()
        self.busy = self.most = self.running = self.busy_long = 0
        self._short_waiting = 0
        self._long_line: list[int] = []  # tickets of the long jobs waiting for a slot, oldest first
        self._tickets = itertools.count()

    def _may_take(self, ticket: int | None) -> bool:
        if self.busy >= self.slots:
            return False
        if ticket is None:
            return True
        return self.busy_long < self.long_slots and not self._short_waiting and ticket == self._long_line[0]

    def _take(self, long: bool) -> None:
        with self._cond:
            ticket = next(self._tickets) if long else None
            if long:
                self._long_line.append(ticket)
            else:
                self._short_waiting += 1
            try:
                self._cond.wait_for(lambda: self._may_take(ticket))
            finally:
                if long:
                    self._long_line.remove(ticket)
                else:
                    self._short_waiting -= 1
                self._cond.notify_all()  # the line moved: the next long job may be first now
            self.busy += 1
            self.busy_long += long
            self.most = max(self.most, self.busy)

    def _give(self, long: bool) -> None:
        with self._cond:
            self.busy -= 1
            self.busy_long -= long
            self._cond.notify_all()

    def waiting(self) -> bool:
        """Whether any job waits for a slot now."""
        with self._cond:
            return bool(self._short_waiting or self._long_line)

    @contextlib.contextmanager
    def slot(self, long: bool = False):
        self._take(long)
        held = Held(self, long)
        try:
            yield held
        finally:
            self._give(long)

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


class Held:
    """A slot held by a job; ``share()`` between two of its decodes lets whoever waits go first."""

    def __init__(self, work: Work, long: bool):
        self.work, self.long = work, long

    def share(self) -> None:
        if self.work.waiting():
            self.work._give(self.long)
            self.work._take(self.long)  # behind the short requests waiting, and behind the long jobs that asked first


WORK = Work(DECODE_CONCURRENCY)


def gated(handler, long: bool = False):
    """A generator handler whose computing (each resumption up to its next yield) holds a ``WORK`` slot (a long
    one: ``long``). The signature is the handler's own, so Gradio injects its request and progress as before."""

    @functools.wraps(handler)
    def run(*args, **kwargs):
        visitor = visitor_of(args, kwargs)
        with WORK.job():
            steps = handler(*args, **kwargs)
            try:
                while True:
                    with WORK.slot(long), loads_by(visitor):  # the models it loads are counted as its visitor's
                        try:
                            item = next(steps)
                        except StopIteration:
                            return
                    yield item
            finally:
                steps.close()  # a generator Gradio dropped: its own finally blocks run now (Stop bookkeeping, …)

    return run


def request_of(args, kwargs):
    """The request among a handler's arguments (Gradio injects it where the handler names a ``gr.Request``)."""
    return next((a for a in (*args, *kwargs.values()) if hasattr(a, "session_hash")), None)


def visitor_of(args, kwargs) -> str | None:
    """The visitor of a handler's call (``session.visitor_id`` of its request), or None without one."""
    request = request_of(args, kwargs)
    return visitor_id(request) if request is not None else None


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
