"""Per-browser-session signals that must reach a running handler: the Stop button's request, and whether
the user stepped to a round while the decode runs (then the page stops following the newest round)."""

from __future__ import annotations

import threading

from explorer.limits import MAX_SESSION_TRACE_BYTES, MAX_STORED_TRACE_BYTES, PROXY_HOPS


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


def visitor_id(request) -> str:
    """Who is asking, across their tabs, sessions and API calls: what a visitor's share of the machine is counted
    by (``long_jobs``: one long job at a time; ``api.loads_by``: models loaded). A page's session hash is per tab
    and an API client makes a new one per call, so the client's address is the visitor: behind a Space's proxy
    the address that proxy appended to X-Forwarded-For (``limits.PROXY_HOPS`` from the right: what a client writes
    there itself comes before it), elsewhere the socket's peer. Every MCP caller is one visitor, ``mcp``: Gradio's
    MCP server sends their calls through one client of its own on loopback (``history_session``). Without an
    address (a handler called in-process), the session."""
    headers = getattr(request, "headers", None) or {}
    if headers.get("x-gradio-user") == "mcp":
        return "mcp"
    address = None
    if PROXY_HOPS:
        hops = [part.strip() for part in str(headers.get("x-forwarded-for") or "").split(",")]
        address = hops[-PROXY_HOPS] if len(hops) >= PROXY_HOPS and hops[-PROXY_HOPS] else None
    address = address or getattr(getattr(request, "client", None), "host", None)
    if address:
        return f"ip:{str(address)[:64]}"
    return f"session:{session_id(request)}"


def history_session(request, api: bool = False) -> str | None:
    """Whose earlier runs a method that learns from them keeps apart (``Method.session_state``: ``suffix`` drafts from
    and joins a session's finished outputs): the page's own session; a public-API client's own, named
    ``methods.API_SESSION_PREFIX…`` (``api``) so that a script that
    opens a session per call pushes out API sessions before any visitor's; and ``None``, no history at all, where
    callers cannot be told apart. Gradio's MCP server sends every MCP caller's call through one cached client with
    one session hash (its streamable HTTP transport is stateless: there is no ``mcp-session-id`` to key on), and
    marks it ``x-gradio-user: mcp``; a call without a session hash would share ``anonymous`` with every other."""
    from explorer.methods import API_SESSION_PREFIX

    session_hash = getattr(request, "session_hash", None)
    headers = getattr(request, "headers", None) or {}
    if not session_hash or headers.get("x-gradio-user") == "mcp":
        return None
    return f"{API_SESSION_PREFIX}{session_hash}" if api else session_hash


# What Gradio (6.31, state_holder.py) keeps for a page once it is closed, measured (issue 40): every gr.State value
# (the current trace) for an hour (STATE_TTL_WHEN_CLOSED, whatever gr.State(time_to_live) says), and the last value
# of every output component (figures, HTML: the session's config, kept for deep links) until 10 000 newer sessions
# push it out. Three pages that had drawn a forged lookahead round kept 75 MB each of it 15 s after closing.
def release_state(request) -> None:
    """Drop Gradio's state of a page that was closed (its ``demo.unload``): its gr.State values and its outputs'
    last values. The app already forgets a closed page's runs, trace files and jobs at this moment; a page whose
    connection dropped and came back finds its state empty, as it finds its runs."""
    session_hash = getattr(request, "session_hash", None)
    holder = getattr(getattr(getattr(request, "request", None), "app", None), "state_holder", None)
    if not session_hash or holder is None or session_hash not in getattr(holder, "session_data", {}):
        return
    holder.delete_state(session_hash)  # Gradio's own: each gr.State's delete_callback, then its value
    with holder.lock:
        holder.session_data.pop(session_hash, None)
        holder.time_last_used.pop(session_hash, None)


STOPS = StopRequests()


class SessionRuns:
    """Each browser session's finished runs and uploaded traces (the newest ``per_session``; the sessions
    seen last, at most ``sessions``), for the Compare tab's "your runs", bounded in bytes too: a session
    keeps at most ``session_bytes`` of trace JSON and all sessions together ``total_bytes`` (a trace's JSON
    size; in memory it takes ≈ 9× that), the oldest runs dropped first."""

    def __init__(self, per_session: int = 20, sessions: int = 256, session_bytes: int = MAX_SESSION_TRACE_BYTES,
                 total_bytes: int = MAX_STORED_TRACE_BYTES):
        from collections import OrderedDict

        self.per_session, self.sessions = per_session, sessions
        self.session_bytes, self.total_bytes = session_bytes, total_bytes
        self._runs: "OrderedDict[str, list[tuple[object, int]]]" = OrderedDict()
        self._lock = threading.Lock()

    def add(self, session: str, trace, size: int) -> int:
        """Keep ``trace`` (``size``: its JSON's bytes); returns how many of this session's earlier runs
        were dropped to make room (a trace larger than the session's budget is not kept: -1)."""
        with self._lock:
            if size > self.session_bytes:
                return -1
            runs = self._runs.setdefault(session, [])
            before = len(runs)
            runs.append((trace, size))
            del runs[: -self.per_session]
            while sum(n for _, n in runs) > self.session_bytes:
                del runs[0]
            dropped = before + 1 - len(runs)
            self._runs.move_to_end(session)
            while len(self._runs) > self.sessions:
                self._runs.popitem(last=False)
            while self.bytes() > self.total_bytes:  # the sessions seen longest ago give way first
                oldest = next(iter(self._runs))
                del self._runs[oldest][0]
                if not self._runs[oldest]:
                    del self._runs[oldest]
            return dropped

    def bytes(self) -> int:
        return sum(n for runs in self._runs.values() for _, n in runs)

    def of(self, session: str) -> list:
        with self._lock:
            return [trace for trace, _ in self._runs.get(session, ())]

    def forget(self, session: str) -> None:
        with self._lock:
            self._runs.pop(session, None)


RUNS = SessionRuns()
