"""Per-browser-session signals that must reach a running handler: the Stop button's request, and whether
the user stepped to a round while the decode runs (then the page stops following the newest round)."""

from __future__ import annotations

import threading


class StopRequests:
    """Which sessions are decoding, and which of them asked to stop (checked after every round)."""

    def __init__(self):
        self._running: set[str] = set()
        self._pending: set[str] = set()
        self._stepped: set[str] = set()
        self._lock = threading.Lock()

    def begin(self, session: str) -> None:
        with self._lock:
            self._running.add(session)
            self._pending.discard(session)
            self._stepped.discard(session)

    def end(self, session: str) -> None:
        with self._lock:
            self._running.discard(session)
            self._pending.discard(session)
            self._stepped.discard(session)

    def step(self, session: str) -> None:
        """The user chose a round: while this session decodes, its page stays on that round."""
        with self._lock:
            if session in self._running:
                self._stepped.add(session)

    def stepped(self, session: str) -> bool:
        with self._lock:
            return session in self._stepped

    def request(self, session: str) -> bool:
        """Ask the session's decode to stop; False when it has none running."""
        with self._lock:
            if session not in self._running:
                return False
            self._pending.add(session)
            return True

    def pending(self, session: str) -> bool:
        with self._lock:
            return session in self._pending


def session_id(request) -> str:
    """The browser session's id (one per open page); API calls without one share ``anonymous``."""
    return getattr(request, "session_hash", None) or "anonymous"


STOPS = StopRequests()


class SessionRuns:
    """Each browser session's finished runs and uploaded traces (the newest ``per_session``; the sessions
    seen last, at most ``sessions``), for the Compare tab's "your runs"."""

    def __init__(self, per_session: int = 20, sessions: int = 256):
        from collections import OrderedDict

        self.per_session, self.sessions = per_session, sessions
        self._runs: "OrderedDict[str, list]" = OrderedDict()
        self._lock = threading.Lock()

    def add(self, session: str, trace) -> None:
        with self._lock:
            runs = self._runs.setdefault(session, [])
            runs.append(trace)
            del runs[: -self.per_session]
            self._runs.move_to_end(session)
            while len(self._runs) > self.sessions:
                self._runs.popitem(last=False)

    def of(self, session: str) -> list:
        with self._lock:
            return list(self._runs.get(session, ()))

    def forget(self, session: str) -> None:
        with self._lock:
            self._runs.pop(session, None)


RUNS = SessionRuns()
