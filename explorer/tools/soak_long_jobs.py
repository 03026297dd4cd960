"""``soak --adversarial``'s probe of issue 51: two tabs of one visitor each start the page's sampling audit with
`quantized` and 2 000 runs, while another client asks ``/decode`` for one token every ``EVERY_S``; every one of
those must answer within ``SHORT_WITHIN_S`` throughout.

Before issue 51 the two audits took both decode slots (their price counted tokens, not time) and the other
client's one-token decode was still queued after 60 s. Now the first tab's audit is priced from its measured pace
and cut to what a job may take, the second tab waits in line with its place shown (one long job a visitor), and a
long job never holds the last slot.

The tabs are the page's own events, sent as the page sends them (Gradio's queue: ``/gradio_api/queue/join`` with the
event's index and a session of its own, read back from ``/gradio_api/queue/data``), and closed as a tab closes
(its heartbeat connection dropped: ``demo.unload``), after which their jobs must stop.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

from .soak_clients import page_client

RUNS = 2000
EVERY_S = 2.0  # the other client's one-token decodes, one every this often
SHORT_WITHIN_S = 5.0
PROBE_S = 40.0  # how long the tabs audit while the other client asks
STOP_WITHIN_S = 40.0  # after the tabs close: Gradio notices a dropped heartbeat within its rate (15 s), then a run
GIVE_UP_S = 30.0  # a one-token decode not answered by then is recorded as such (None) and the probe ends


class Tab:
    """One page session: its heartbeat held open (closing it is closing the tab) and one event read as it streams."""

    def __init__(self, url: str):
        import httpx

        self.url, self.session = url, uuid.uuid4().hex[:11]
        self.http = httpx.Client(timeout=None)
        self.messages: list[dict] = []
        self._heart = self.http.stream("GET", f"{url}gradio_api/heartbeat/{self.session}")
        self._heart.__enter__()

    def start(self, fn_index: int, data: list) -> None:
        """Join the queue with the page's event ``fn_index`` and read its messages in a thread."""
        response = self.http.post(f"{self.url}gradio_api/queue/join", json={
            "data": data, "event_data": None, "fn_index": fn_index, "trigger_id": None, "session_hash": self.session})
        response.raise_for_status()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        with self.http.stream("GET", f"{self.url}gradio_api/queue/data", params={"session_hash": self.session}) as r:
            for line in r.iter_lines():
                if line.startswith("data:"):
                    message = json.loads(line[5:])
                    self.messages.append(message)
                    if message.get("msg") == "process_completed":
                        return

    def said(self) -> list[str]:
        """What the page showed of the job: its progress lines and its end."""
        lines = []
        for m in self.messages:
            if m.get("msg") == "progress":
                lines += [p.get("desc") or "" for p in m.get("progress_data") or []]
            elif m.get("msg") == "process_completed":
                output = m.get("output") or {}
                lines.append("completed: " + str(output.get("error") or output.get("data", ""))[:300])
        return [line for line in lines if line]

    def close(self) -> None:
        self._heart.__exit__(None, None, None)
        self.http.close()


def audit_event(demo, model: str) -> tuple[int, list]:
    """The page's sampling-audit event and its inputs as a page would send them: `quantized` (int4), 2 000 runs."""
    index, fn = next((i, f) for i, f in demo.fns.items() if getattr(f, "name", None) == "run_audit")
    chosen = {"model": model, "method": "quantized", "draft": "int4", "audit-runs": RUNS}
    if model.startswith("tiny-random"):  # its 32 characters; the default keeps the page's own prompt
        chosen["prompt"] = "one two three one two three"
    return index, [chosen.get(getattr(block, "elem_id", None), block.value) for block in fn.inputs]


def two_tab_audit(demo, url: str, model: str, progress, probe_s: float | None = None) -> dict:
    """Two tabs audit; another client decodes one token every ``EVERY_S`` meanwhile (for ``probe_s``, by default
    ``PROBE_S``); then the tabs close."""
    from ..ui import jobs

    client = page_client(url, download_files=False)
    # warm, as the soak warms every kind of job: not what is measured. The first `quantized` start in a process builds
    # the target's 4-bit copy under the load lock, and a decode arriving then waits for it (7.2 s with the default)
    for method, draft in (("ar", None), ("quantized", "int4")):
        client.predict("abc", method, draft, 4, 0.0, 1, 0, model, api_name="/decode")
    index, data = audit_event(demo, model)
    tabs = [Tab(url), Tab(url)]
    for tab in tabs:
        tab.start(index, data)
    latencies, probe_s = [], PROBE_S if probe_s is None else probe_s
    started = time.perf_counter()
    while time.perf_counter() - started < probe_s:
        asked = time.perf_counter()
        job = client.submit("abc", "ar", None, 4, 0.0, 1, 0, model, api_name="/decode")
        try:
            job.result(timeout=GIVE_UP_S)
            latencies.append(round(time.perf_counter() - asked, 2))
        except TimeoutError:  # still queued: before issue 51, for as long as the audits ran
            job.cancel()
            latencies.append(None)
            break
        time.sleep(max(0.0, EVERY_S - (time.perf_counter() - asked)))
    under_way = jobs.WORK.busy
    closed = time.perf_counter()
    for tab in tabs:
        tab.close()
    while jobs.WORK.busy and time.perf_counter() - closed < STOP_WITHIN_S:
        time.sleep(0.25)
    stopped_s = round(time.perf_counter() - closed, 1) if not jobs.WORK.busy else None
    # the tabs start at once and either may be admitted first: the one told to wait is the second in line
    if (tabs[0].said() or [""])[0].startswith("Waiting"):
        tabs.reverse()
    row = {"tabs": len(tabs), "runs_asked": RUNS, "model": model, "probe_s": probe_s,
           "one_token_decodes": len(latencies), "latencies_s": latencies, "within_s": SHORT_WITHIN_S,
           "slowest_s": None if None in latencies else max(latencies),
           "all_within": None not in latencies and max(latencies) <= SHORT_WITHIN_S,
           "computing_when_closed": under_way, "idle_after_close_s": stopped_s,
           "first_tab_said": tabs[0].said()[-3:], "second_tab_said": tabs[1].said()[:3]}
    slowest = f"{row['slowest_s']} s" if row["slowest_s"] is not None else f"one unanswered after {GIVE_UP_S:g} s"
    progress(f"two tabs' {RUNS}-run quantized audits: {len(latencies)} one-token decodes from another client, the "
             f"slowest {slowest} (within {SHORT_WITHIN_S:g} s: {row['all_within']}); the second tab said "
             f"{(row['second_tab_said'] or ['nothing'])[0]!r}; the server idle {stopped_s} s after the tabs closed")
    return row
