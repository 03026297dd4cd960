"""Long jobs on a shared machine (the sampling audit, the race, the theory lab, the BiLD sweep, a measured what-if):
priced in time, one under way per visitor, the others in line with their place shown.

Why (issue 51): the audit's price counted tokens (runs × prompt tokens ≤ 400 000), not the time its method takes
here. Two tabs' 2 000-run `quantized` audits passed it, each would have run ~40 minutes, both held the decode
slots, and another client's one-token decode waited in the queue for over a minute. Now:

- **who**: a visitor is ``session.visitor_id`` (the client's address; every MCP caller together), so a visitor's
  tabs and API calls are one visitor;
- **how long**: ``PACES`` keeps the seconds per unit (an audit's run, a sweep's grid point, …) each kind of job took
  here, the median of its newest; a job whose pace is known is priced before it starts, any other once its first
  units have run, and is refused (or cut: the audit) where the whole would take more than
  ``limits.MAX_JOB_SECONDS``, in one line that names the time it would take;
- **when**: ``LINE`` lets ``MAX_UNDER_WAY`` long jobs be under way at once, one per visitor; the others wait in the
  order they came and are told their place and, from the jobs ahead's measured pace, about how long they wait;
  a visitor may have ``MAX_WAITING_PER_VISITOR`` waiting, more are refused;
- **on which cores**: a long slot of ``jobs.WORK`` (never the last slot; short requests first), offered back between
  two decodes (``LongJob.between``).
"""

from __future__ import annotations

import contextlib
import functools
import statistics
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Callable, Hashable

from explorer.api import loads_by
from explorer.errors import ExplorerError
from explorer.limits import MAX_JOB_SECONDS
from explorer.words import duration

from .jobs import DECODE_CONCURRENCY, WORK, gated, request_of, stopped
from .session import session_id, visitor_id

MAX_UNDER_WAY = max(1, DECODE_CONCURRENCY)  # long jobs under way at once; they take turns on WORK's long slots
MAX_WAITING_PER_VISITOR = 2
# Gradio's queue for long jobs (its concurrency group ``LONG_GROUP``): those under way and those waiting in LINE;
# past it Gradio queues the event itself, with its place shown
LONG_GROUP = "long"
LONG_CONCURRENCY = MAX_UNDER_WAY + 6
TELL_EVERY_S = 1.0  # a waiting job's line is checked (and its place told again, if it moved) this often


class Paces:
    """Seconds per unit of each kind of long job (its key: what decides its pace), measured here: the median of the
    newest ``keep``, for at most ``kinds`` keys (the oldest forgotten)."""

    def __init__(self, keep: int = 8, kinds: int = 512):
        self.keep, self.kinds = keep, kinds
        self._seen: OrderedDict[Hashable, deque] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, key: Hashable, seconds_per_unit: float) -> None:
        if seconds_per_unit > 0:
            with self._lock:
                self._seen.setdefault(key, deque(maxlen=self.keep)).append(seconds_per_unit)
                self._seen.move_to_end(key)
                while len(self._seen) > self.kinds:
                    self._seen.popitem(last=False)

    def get(self, key: Hashable) -> float | None:
        with self._lock:
            seen = self._seen.get(key)
            return statistics.median(seen) if seen else None


PACES = Paces()


@dataclass(eq=False)
class Ticket:
    """A long job in ``LINE``: whose, what, its size and pace (known, then measured) and how far it got."""

    visitor: str
    what: str
    units: int
    per_unit: float | None
    started: float | None = None
    done: int = 0

    def left_s(self) -> float | None:
        """Seconds it still needs, from its pace; None while its pace is unknown."""
        if self.per_unit is None:
            return None
        return max(0.0, (self.units - self.done) * self.per_unit)


class Line:
    """Long jobs under way (at most ``under_way``, one per visitor) and those waiting, in the order they came."""

    def __init__(self, under_way: int = MAX_UNDER_WAY, waiting_per_visitor: int = MAX_WAITING_PER_VISITOR):
        self.under_way, self.waiting_per_visitor = under_way, waiting_per_visitor
        self._cond = threading.Condition()
        self.running: list[Ticket] = []
        self.waiting: list[Ticket] = []

    def _next(self) -> Ticket | None:
        """The ticket to start now: the first waiting one whose visitor has none under way, if there is room."""
        if len(self.running) >= self.under_way:
            return None
        busy = {t.visitor for t in self.running}
        return next((t for t in self.waiting if t.visitor not in busy), None)

    def ahead(self, ticket: Ticket) -> tuple[int, float | None, bool]:
        """(its place in line from 1, about how long until it starts or None where a job ahead has no pace yet,
        whether the visitor's own job is what it waits for)."""
        with self._cond:
            place = self.waiting.index(ticket) + 1
            before = self.running + self.waiting[: place - 1]
            left = [t.left_s() for t in before]
            own = any(t.visitor == ticket.visitor for t in self.running)
        if any(s is None for s in left):
            return place, None, own
        return place, sum(left) / (1 if own else self.under_way), own

    def wait_turn(self, ticket: Ticket, tell: Callable[[str], None], should_stop: Callable[[], bool]) -> None:
        """Join the line and return when ``ticket`` may start (told its place whenever it moves); ``ExplorerError``
        when the visitor has too many waiting, or when ``should_stop`` (the page was closed) while waiting."""
        with self._cond:
            mine = [t for t in self.waiting if t.visitor == ticket.visitor]
            if len(mine) >= self.waiting_per_visitor:
                raise ExplorerError(f"you have {len(mine)} long jobs waiting besides the one under way (at most "
                                    f"{self.waiting_per_visitor}): wait for them, or stop one")
            self.waiting.append(ticket)
        told = None
        try:
            while True:
                with self._cond:
                    if self._next() is ticket:
                        self.waiting.remove(ticket)
                        self.running.append(ticket)
                        ticket.started = time.monotonic()
                        return
                said = waiting_words(*self.ahead(ticket))
                if said != told:
                    tell(said)
                    told = said
                if should_stop():
                    raise ExplorerError(f"{ticket.what} was not started: its page was closed")
                with self._cond:
                    self._cond.wait(TELL_EVERY_S)
        except BaseException:
            with self._cond:
                if ticket in self.waiting:
                    self.waiting.remove(ticket)
                self._cond.notify_all()
            raise

    def leave(self, ticket: Ticket) -> None:
        with self._cond:
            for held in (self.running, self.waiting):
                if ticket in held:
                    held.remove(ticket)
            self._cond.notify_all()


LINE = Line()


def waiting_words(place: int, seconds: float | None, own: bool) -> str:
    """Where a waiting job stands, in one line."""
    who = "your other long job runs first" if own else f"place {place} in line for the long jobs"
    when = (f"about {duration(seconds)} (from the pace measured here)" if seconds is not None
            else "the jobs ahead have not measured their pace yet")
    return f"Waiting: {who}; {when}"


class LongJob:
    """One long job of a visitor (``with LongJob(...) as job``): it waits its turn in ``LINE``, then (``hold_slot``)
    holds a long slot of ``WORK`` until it ends. Call ``job.between()`` before each of its decodes (the slot is
    offered to whoever waits; true once its page is closed) and ``job.progress(done)`` after each unit: the whole is
    priced from the pace measured so far (before the first unit, from ``PACES``) and, past the bound, ``over``:
    "refuse" (in one line), "tell" (once: the race, which stops at the bound and shows what it ran) or "cut" (the
    job cuts itself to the bound, as the audit does, at the pace of its own warm runs). ``units``: the job's size in
    ``unit``s; ``key``: what decides its pace; ``tell(line)``: what the visitor reads while it waits."""

    def __init__(self, request, what: str, key: Hashable, units: int, unit: str = "run", *,
                 tell: Callable[[str], None] = lambda line: None, bound_s: float | None = None,
                 hint: str = "ask for less", over: str = "refuse", hold_slot: bool = True):
        self.what, self.key, self.unit, self.tell, self.hint = what, key, unit, tell, hint
        self.bound_s = MAX_JOB_SECONDS if bound_s is None else bound_s
        self.on_over, self.hold_slot, self.warned, self.stop_asked = over, hold_slot, False, False
        self.session = session_id(request)
        self.ticket = Ticket(visitor_id(request), what, max(1, int(units)), PACES.get(key))
        self._stack = self.held = None

    def __enter__(self) -> "LongJob":
        self._check(self.ticket.per_unit)  # priced before it starts, where its pace is known
        LINE.wait_turn(self.ticket, self.tell, lambda: stopped(self.session))
        self._stack = contextlib.ExitStack()
        try:
            if self.hold_slot:  # a job run in one thread (a generator's steps are gated one by one: jobs.gated)
                self._stack.enter_context(loads_by(self.ticket.visitor))  # the models it loads are its visitor's
                self.held = self._stack.enter_context(WORK.slot(long=True))
        except BaseException:
            self._stack.close()
            LINE.leave(self.ticket)
            raise
        return self

    def __exit__(self, kind, error, traceback) -> None:
        try:
            self._stack.__exit__(kind, error, traceback)
        finally:
            LINE.leave(self.ticket)
        ticket = self.ticket
        if ticket.done and ticket.started is not None and self.key is not None:
            PACES.add(self.key, (time.monotonic() - ticket.started) / ticket.done)

    def between(self) -> bool:
        """Before a decode: let a waiting short request (or the next long job) have the slot first; whether this
        job's page was closed (then it stops)."""
        if self.held is not None:
            self.held.share()
        return stopped(self.session)

    def progress(self, done: int, total: int | None = None) -> None:
        """``done`` units of ``total`` (the job's own count, where it knows better) are done: the pace so far prices
        the whole."""
        ticket = self.ticket
        ticket.done, ticket.units = done, max(1, total or ticket.units)
        if done and ticket.started is not None:
            ticket.per_unit = (time.monotonic() - ticket.started) / done
        self._check(ticket.per_unit)

    def told(self, progress) -> Callable[[int, int, str], None]:
        """A sweep's ``progress(done, total, line)``: the job priced as it goes, and the line shown on the page's
        ``gr.Progress``."""

        def report(done: int, total: int, line: str) -> None:
            self.progress(done, total)
            progress(done / total, desc=line)

        return report

    def spent(self) -> bool:
        """Whether the job has run for its whole bound."""
        started = self.ticket.started
        return started is not None and time.monotonic() - started > self.bound_s

    def over(self, per_unit: float | None) -> str | None:
        """What the whole would take at ``per_unit`` seconds a unit, in words, where that is past the bound."""
        units = self.ticket.units
        if per_unit is None or units * per_unit <= self.bound_s:
            return None
        return (f"{self.what} would take about {duration(units * per_unit)} here ({units:,} {self.unit}s at "
                f"{per_unit:.2g} s a {self.unit}, measured); a job may take at most {duration(self.bound_s)} on this "
                f"Space")

    def _check(self, per_unit: float | None) -> None:
        said = self.over(per_unit)
        if said is None or self.on_over == "cut":
            return
        if self.on_over == "refuse":
            raise ExplorerError(f"{said}: {self.hint}")
        if not self.warned:
            self.warned = True
            self.tell(f"{said}: {self.hint}")


def progress(session: str, done: int, total: int) -> None:
    """A long job's progress, told by its handler that knows only its session (the race's loop)."""
    job = _UNDER_WAY.get(session)
    if job is not None:
        job.progress(done, total)


_UNDER_WAY: dict[str, LongJob] = {}  # session → its long job run by ``long_gated``


def long_gated(handler, what: str, stop: Callable[[str], object], unit: str = "token"):
    """A generator handler (the race) run as a long job: it waits its turn in ``LINE`` (its place told in a toast),
    then each resumption holds a long slot (``jobs.gated(handler, long=True)``). It reports its progress with
    ``progress(session, …)``; past the bound ``stop(session)`` asks it to end (and show what it ran) and the visitor
    is told why in one line."""
    import gradio as gr

    inner = gated(handler, long=True)

    @functools.wraps(handler)
    def run(*args, **kwargs):
        job = LongJob(request_of(args, kwargs), what, what, 1, unit, tell=lambda line: gr.Info(line), over="tell",
                      hold_slot=False, hint=f"it stops at {duration(MAX_JOB_SECONDS)} and shows what it ran")
        with job:
            _UNDER_WAY[job.session] = job
            try:
                for item in inner(*args, **kwargs):
                    yield item
                    if job.spent() and not job.stop_asked:
                        job.stop_asked = True
                        stop(job.session)
                        job.tell(f"{what} reached the {duration(job.bound_s)} a job may take on this Space: it "
                                 "stops here and shows what it ran")
            finally:
                _UNDER_WAY.pop(job.session, None)

    return run
