"""After a run: what it is weighed against, measured fairly while the page stays free.

Plain decoding on the run's prompt and settings (unless one is cached at the machine's current pace), and for a
``quantized`` run the same 4-bit copy in its other role (the copy alone beside the drafting run, or the reverse):
"what keeping the text costs" (``viz.keeping``). The two run as lanes of a race (``explorer.race``): they take
turns on the CPU, so load that comes and goes falls on both alike, and each records the machine's pace.

The page stays free meanwhile: Run is enabled again as soon as the run's own rounds end, and a new run ends this
measurement between two of its rounds (``CLICKS``), where it used to keep Run grey for 40–100 s (#48); the status
says so, with progress.
"""

from __future__ import annotations

import threading
import time

import gradio as gr

from explorer import race, viz
from explorer.viz.keeping import Keeping, keeping_html
from explorer.viz.writer import copy_alone

from .baseline import BASELINES, COMPANIONS
from .session import STOPS
from .showing import Showing, audit_words

SHOW_EVERY_S = 1.0  # progress lines while the comparison runs
FREE = "Run is free again: a new run skips this measurement."


class Clicks:
    """Runs a session asked for (Run clicked) whose event chain has not ended: a newer click tells a run still
    measuring its comparison to stop, and Run is enabled again only when the last chain ends."""

    def __init__(self):
        self._asked: dict[str, int] = {}
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def ask(self, session: str) -> None:
        with self._lock:
            self._asked[session] = self._asked.get(session, 0) + 1
            self._open[session] = self._open.get(session, 0) + 1

    def latest(self, session: str) -> int:
        with self._lock:
            return self._asked.get(session, 0)

    def end(self, session: str) -> bool:
        """A chain ended; True when no other run of the session is open (then the session is forgotten)."""
        with self._lock:
            left = self._open.get(session, 1) - 1
            if left > 0:
                self._open[session] = left
                return False
            self._open.pop(session, None)
            self._asked.pop(session, None)
            return True


CLICKS = Clicks()


def companion_system(trace) -> str | None:
    """The race system of the run that stands beside ``trace`` in "what keeping the text costs": the same copy in
    its other role (None for every run but a finished, greedy or sampled, ``quantized`` one)."""
    if trace.method != "quantized" or not trace.rounds or str(trace.draft) not in ("int4", "int8"):
        return None
    if copy_alone(trace):
        s = trace.settings
        return f"quantized:{trace.draft}/{s.controller}@{s.gamma}" if s.controller and s.gamma else \
            f"quantized:{trace.draft}"
    return f"quantized:{trace.draft}:alone"


class Comparing(Showing):
    """The measurement after a run, and the view it fills."""

    def _compare(self, trace, baseline, which: str, theory_args, session: str, mine: int):
        """Measure what the run still needs (plain decoding, its companion) as race lanes, then draw the comparison.
        ``mine``: the click that started this run (``CLICKS``); ``theory_args``: the theory sliders (α, c, ĉ)."""
        p = self.page
        if CLICKS.latest(session) != mine:  # a newer run was asked for before this one finished: it owns the page
            return
        companion = companion_system(trace)
        pace = trace.pace_ms[-1] if trace.pace_ms else None
        other = COMPANIONS.fresh(trace, companion, pace) if companion and pace else None
        need_plain, need_other = baseline is None, companion is not None and other is None
        timed = ("the run as it decoded; plain decoding and its companion measured earlier on these settings, with "
                 "the machine at the same pace")
        if need_plain or need_other:
            names = [n for n, needed in (("plain decoding", need_plain), (_words(companion), need_other)) if needed]
            lanes = race.start(trace.model, None, [companion] if need_other else [], prompt_ids=list(trace.prompt_ids),
                               temperature=trace.settings.temperature, top_k=trace.settings.top_k,
                               top_p=trace.settings.top_p, max_new_tokens=trace.settings.max_new_tokens,
                               seed=trace.settings.seed, chat=trace.settings.chat, dtype=trace.dtype,
                               device=trace.device, session=None, plain=need_plain)
            shown = time.perf_counter()
            if need_other and CLICKS.latest(session) == mine:  # the view says what is coming while it is measured
                yield {p.keeping: gr.HTML(keeping_html(None, f"◷ Measuring {' and '.join(names)} on this prompt and "
                                                             "settings, taking turns on the CPU…"), visible=True)}
            for _ in race.steps(lanes):
                if CLICKS.latest(session) != mine:
                    return
                if STOPS.pending(session):
                    yield {p.status: f"{viz.run_summary(trace, baseline)}\n\nComparison skipped (stopped).",
                           p.keeping: gr.HTML(visible=False)}
                    return
                if time.perf_counter() - shown >= SHOW_EVERY_S:
                    shown = time.perf_counter()
                    done = " and ".join(f"{n} {sum(len(r.emitted) for r in lane.decoding.rounds)} / "
                                        f"{trace.settings.max_new_tokens} tokens" for n, lane in zip(names, lanes))
                    yield {p.status: f"{viz.run_summary(trace, baseline)}\n\n◷ Measuring {' and '.join(names)} on the "
                                     f"same prompt and settings{', taking turns on the CPU' if len(lanes) > 1 else ''}:"
                                     f" {done}. {FREE}"}
            traces = [lane.decoding.trace() for lane in lanes]
            if need_plain:
                BASELINES.put(traces[0], traces[0].pace_ms[0] if traces[0].pace_ms else None)
                baseline = BASELINES.get(trace)
                which = ("Compared with plain decoding measured right after this run, on the same prompt and settings"
                         + (f", taking turns with {_words(companion)}." if need_other else "."))
            if need_other:
                other = traces[-1]
                COMPANIONS.put(companion, other, other.pace_ms[0] if other.pace_ms else None)
            timed = ("the run as it decoded; " + " and ".join(names) + " right after it"
                     + (", taking turns on the CPU (as the race's lanes do)" if len(lanes) > 1 else "")
                     + ("; plain decoding earlier on these settings, at the same pace" if not need_plain else ""))
        updates = {
            p.latency: viz.latency_figure(trace, baseline),
            p.theory: viz.theory_figure(*theory_args, trace, baseline),
            p.status: f"{viz.run_summary(trace, baseline)}\n\n{which}",
            p.why: viz.speed_explanation(trace, baseline, self._others(trace, session)),
            p.audit: audit_words(trace, baseline),
        }
        if companion is not None and baseline is not None and other is not None:
            pair = (other, trace) if copy_alone(trace) else (trace, other)
            updates[p.keeping] = gr.HTML(keeping_html(Keeping(*pair, baseline, timed)), visible=True)
        yield updates


def _words(system: str | None) -> str:
    """A companion system in words: "the 4-bit copy alone", "the 8-bit copy drafting for the target"."""
    if system is None:
        return ""
    bits = "8-bit" if ":int8" in system else "4-bit"
    return f"the {bits} copy alone" if system.endswith(":alone") else f"the {bits} copy drafting for the target"
