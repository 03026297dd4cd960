"""After a run: what it is weighed against, measured fairly while the page stays free.

Plain decoding on the run's prompt and settings (unless one is cached at the machine's current pace), and for a
``quantized`` run "what keeping the text costs" (``viz.keeping``): plain decoding, the 4-bit copy drafting and the
copy alone, as the lanes of one race (``explorer.race``). They take turns on the CPU, so load that comes and goes
falls on all of them alike, and each records the machine's pace.

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


def systems_for(trace) -> tuple[str, str] | None:
    """The race systems of "what keeping the text costs" for ``trace``: (the copy drafting, the copy alone), with the
    run's own draft, controller and γ; None for every run but a finished ``quantized`` one."""
    if trace.method != "quantized" or not trace.rounds or str(trace.draft) not in ("int4", "int8"):
        return None
    s = trace.settings
    drafting = f"quantized:{trace.draft}" + (f"/{s.controller}@{s.gamma}" if s.controller and s.gamma else "")
    return drafting, f"quantized:{trace.draft}:alone"


def companion_system(trace) -> str | None:
    """The race system of the run that stands beside ``trace``: the same copy in its other role."""
    systems = systems_for(trace)
    return None if systems is None else systems[0] if copy_alone(trace) else systems[1]


class Comparing(Showing):
    """The measurement after a run, and the view it fills."""

    def _compare(self, trace, baseline, which: str, theory_args, session: str, mine: int):
        """Measure what the run is weighed against as race lanes, then draw the comparison: plain decoding when no
        cached one matches; for a ``quantized`` run, plain decoding, the copy drafting and the copy alone, all three
        lanes of one race (unless a race of them at this pace is cached), so that the view's speeds were taken alike.
        ``mine``: the click that started this run (``CLICKS``); ``theory_args``: the theory sliders (α, c, ĉ)."""
        p = self.page
        if CLICKS.latest(session) != mine:  # a newer run was asked for before this one finished: it owns the page
            return
        systems = systems_for(trace)
        pace = trace.pace_ms[-1] if trace.pace_ms else None
        kept = COMPANIONS.fresh(trace, systems[1], pace) if systems and pace else None
        if baseline is None or (systems is not None and kept is None):
            lanes_for = list(systems) if systems is not None and kept is None else []
            names = ["plain decoding"] + [_words(n) for n in lanes_for]
            lanes = race.start(trace.model, None, lanes_for, prompt_ids=list(trace.prompt_ids),
                               temperature=trace.settings.temperature, top_k=trace.settings.top_k,
                               top_p=trace.settings.top_p, max_new_tokens=trace.settings.max_new_tokens,
                               seed=trace.settings.seed, chat=trace.settings.chat, dtype=trace.dtype,
                               device=trace.device, session=None)
            shown = time.perf_counter()
            if lanes_for and CLICKS.latest(session) == mine:  # the view says what is coming while it is measured
                yield {p.keeping: gr.HTML(keeping_html(None, f"◷ Racing {', '.join(names[:-1])} and {names[-1]} on "
                                                             "this prompt and settings, taking turns on the CPU…"),
                                          visible=True)}
            for _ in race.steps(lanes):
                if CLICKS.latest(session) != mine:
                    return
                if STOPS.pending(session):
                    yield {p.status: f"{viz.run_summary(trace, baseline)}\n\nComparison skipped (stopped).",
                           p.keeping: gr.HTML(visible=False)}
                    return
                if time.perf_counter() - shown >= SHOW_EVERY_S:
                    shown = time.perf_counter()
                    done = ", ".join(f"{n} {sum(len(r.emitted) for r in lane.decoding.rounds)} / "
                                     f"{trace.settings.max_new_tokens} tokens" for n, lane in zip(names, lanes))
                    yield {p.status: f"{viz.run_summary(trace, baseline)}\n\n◷ Measuring {' and '.join(names)} on the "
                                     f"same prompt and settings{', taking turns on the CPU' if len(lanes) > 1 else ''}:"
                                     f" {done}. {FREE}"}
            traces = [lane.decoding.trace() for lane in lanes]
            if baseline is None:
                BASELINES.put(traces[0], traces[0].pace_ms[0] if traces[0].pace_ms else None)
                baseline = BASELINES.get(trace)
                which = ("Compared with plain decoding measured right after this run, on the same prompt and settings"
                         + (", as one lane of a race with the 4-bit copy drafting and alone." if lanes_for else "."))
            if lanes_for:
                kept = Keeping(traces[1], traces[2], traces[0], RACED)
                COMPANIONS.put(trace, systems[1], kept, traces[0].pace_ms[0] if traces[0].pace_ms else None)
        if kept is not None:  # the same method raced beside plain decoding: its figure may differ from the live run's
            raced = kept.alone if copy_alone(trace) else kept.drafting
            ratio = viz.measured_speedup(raced, kept.plain)
            if ratio is not None:
                which += (f" The same settings raced again right after, as a lane beside plain decoding: ×{ratio:.2f} "
                          "(What keeping the text costs); the figure above is this run's own, taken as it decoded "
                          "while the page drew it.")
        updates = {
            p.latency: viz.latency_figure(trace, baseline),
            p.theory: viz.theory_figure(*theory_args, trace, baseline),
            p.status: f"{viz.run_summary(trace, baseline)}\n\n{which}",
            p.why: viz.speed_explanation(trace, baseline, self._others(trace, session)),
            p.audit: audit_words(trace, baseline),
        }
        if kept is not None:
            updates[p.keeping] = gr.HTML(keeping_html(kept), visible=True)
        yield updates


RACED = ("all three right after the run, as the lanes of one race taking turns on the CPU (the status's figure is the "
         "run itself, as it decoded, against plain decoding)")


def _words(system: str | None) -> str:
    """A companion system in words: "the 4-bit copy alone", "the 8-bit copy drafting for the target"."""
    if system is None:
        return ""
    bits = "8-bit" if ":int8" in system else "4-bit"
    return f"the {bits} copy alone" if system.endswith(":alone") else f"the {bits} copy drafting for the target"
