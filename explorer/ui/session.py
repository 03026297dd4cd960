"""Per-browser-session signals that must reach a running handler: the Stop button's request."""

from __future__ import annotations

import threading


class StopRequests:
    """Sessions that asked their running decode to stop (checked by the decode after every round)."""

    def __init__(self):
        self._pending: set[str] = set()
        self._lock = threading.Lock()

    def request(self, session: str) -> None:
        with self._lock:
            self._pending.add(session)

    def clear(self, session: str) -> None:
        with self._lock:
            self._pending.discard(session)

    def pending(self, session: str) -> bool:
        with self._lock:
            return session in self._pending


def session_id(request) -> str:
    """The browser session's id (one per open page); API calls without one share ``anonymous``."""
    return getattr(request, "session_hash", None) or "anonymous"


STOPS = StopRequests()
