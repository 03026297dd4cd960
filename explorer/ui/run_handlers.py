"""Run and Stop: a decode streamed to the page round by round while it runs (or, on a ZeroGPU Space, decoded in
one GPU call and then played), Stop after the current round; then what the run is weighed against
(``comparing``: plain decoding on the same settings where no cached one matches, and for ``quantized`` the copy
in its other role), with the page free again meanwhile. A load or a first round that takes long (one-time work:
conversion, kernels, compilation, the 4-bit copy) says on the page what it is waiting for (``waiting``)."""

from __future__ import annotations

import itertools
import logging
import time

import gradio as gr

import explorer
from explorer import viz
from explorer.pace import probe_ms

from . import zerogpu
from .baseline import BASELINES
from .comparing import CLICKS, FREE, Comparing, companion_system
from .controls import draft_left_behind
from .inputs import decode_options, precision
from .session import STOPS, history_session, session_id
from .showing import slider_for
from .waiting import waiting

log = logging.getLogger(__name__)

# Live updates while decoding. The page is drawn in the process that decodes, and drawing competes with
# the decode for the CPU (and Python's GIL), which would slow the very rounds being timed: the token view
# (cheap) follows every few rounds, the figures (tens of ms each) every couple of seconds.
LIVE_TEXT_EVERY_S = 0.3
LIVE_PLOTS_EVERY_S = 2.0
END = object()  # a run with no round at all
NOTHING_TO_STOP = "■ Nothing is running: Stop ends a decode after its current round."


class Running(Comparing):
    """Run and Stop."""

    def run(self, values: dict, request: gr.Request):
        """Decode, streaming rounds to the page; then weigh it against plain decoding (and a ``quantized`` run against
        its copy in the other role), with Run free again. ``values``: the page's inputs by component
        (``Page.run_inputs``)."""
        p = self.page
        model = values[p.model]
        alpha, c, c_hat = values[p.theory_alpha], values[p.theory_c], values[p.theory_c_hat]
        session = session_id(request)
        mine = CLICKS.latest(session)  # a newer click on Run ends this run's comparison (``comparing``)
        STOPS.begin(session)
        try:
            own, swapped = draft_left_behind(values[p.method], model, values[p.draft]), ""
            if own is not None:  # the method changed just before Run, and its drafter had not reached the box yet
                held = (f"the box still held {values[p.draft]}, another method's," if str(values[p.draft] or "").strip()
                        else "the box was still empty from a method that drafts by itself")
                swapped = viz.safe_markdown(f"\n\n{values[p.method]} runs its drafter {own}: {held} when Run was pressed.")
                values = {**values, p.draft: own}
                yield {p.draft: gr.Dropdown(value=own, allow_custom_value=True), p.status: swapped.strip()}
            options = decode_options(values[p.method], values[p.draft], values[p.gamma], values[p.controller],
                                     values[p.temperature], values[p.top_k], values[p.top_p], values[p.max_new_tokens],
                                     values[p.seed])
            options |= p.options.keywords(options["method"], values) | {"dtype": precision(values[p.precision])}
            prompt = values[p.prompt]
            if zerogpu.use_gpu(values.get(p.hardware)):
                yield from self._run_on_zero_gpu(model, prompt, session, options, alpha, c, c_hat,
                                                 history_session(request))
                return
            options |= {"device": zerogpu.device_for(values.get(p.hardware))}
            loading = f"◷ Loading {viz.safe_markdown(model)} and encoding the prompt…{swapped}"
            yield {p.status: loading, p.run_btn: gr.Button(interactive=False), p.keeping: gr.HTML(visible=False)}
            decoding = yield from waiting(
                lambda: explorer.stream(model, prompt, session=history_session(request), **options),
                lambda s, said: {p.status: _waited(loading, s, said)})
            decoding.watch_pace()  # the machine's pace as it decodes: is a cached baseline comparable, did it hold?
            started = time.perf_counter()
            last_text = last_plots = 0.0
            baseline, which = None, ""
            steps = decoding.steps()
            first = yield from waiting(lambda: next(steps, END), lambda s, said: {
                p.status: _waited(f"◷ {viz.safe_markdown(options['method'])}: decoding its first round…", s, said)})
            for r in itertools.chain([] if first is END else [first], steps):
                if STOPS.pending(session):
                    break
                now = time.perf_counter()
                if r is None:  # work between rounds (a beam search round that settled nothing): say so, and let a
                    # Stop or a closed page end it here (Gradio stops resuming a cancelled generator)
                    yield {p.status: f"◷ {viz.safe_markdown(options['method'])}: searching · {now - started:.1f} s "
                                     f"({len(decoding.rounds)} rounds settled; a round shows once every beam that "
                                     "can still win shares it)"}
                    continue
                if r.index == 0 or now - last_text >= LIVE_TEXT_EVERY_S:
                    trace = decoding.trace()
                    # the first round's tokens go out alone (on screen sooner: no plot to draw first); the
                    # plots follow with the next update that is due
                    plots = r.index > 0 and now - last_plots >= LIVE_PLOTS_EVERY_S
                    if r.index == 0:
                        baseline, which = BASELINES.fresh(trace, pace_at(trace, 0))
                        last_plots = now - LIVE_PLOTS_EVERY_S
                    last_text = now
                    last_plots = now if plots else last_plots
                    status = (f"◷ Decoding… round {r.index + 1} · {trace.summary.new_tokens} / "
                              f"{options['max_new_tokens']} tokens · {now - started:.1f} s"
                              + (f"\n\n{which}" if which and baseline is None else ""))
                    yield self._live(trace, baseline, status, plots, first=r.index == 0,
                                     following=not STOPS.stepped(session))
            trace = decoding.trace()
            BASELINES.put(trace, pace_at(trace, 0))
            stopped = trace.summary.stop_reason == "stopped"
            baseline, which = BASELINES.fresh(trace, pace_at(trace, -1))
            if baseline is None and stopped:
                which = ("This run was stopped, so it is not compared with plain decoding (a run that ends is: "
                         "plain decoding runs once right after it, on the same settings).")
            measure = not stopped and bool(trace.rounds) and (baseline is None or companion_system(trace) is not None)
            finished = self._finished(trace, baseline, alpha, c, c_hat, session, keep_round=STOPS.stepped(session),
                                      which=which)
            if measure:  # the page is free while plain decoding (and the copy's other role) are measured
                finished[p.status] += f"\n\n◷ Measuring what this run is weighed against… {FREE}"
                finished[p.run_btn] = gr.Button(interactive=True)
            yield finished
            if measure:
                yield from self._compare(trace, baseline, which, (alpha, c, c_hat), session, mine)
        except explorer.ExplorerError as err:
            yield self._error(str(err))
        except Exception:  # unexpected: the stack trace goes to the log, never to the page
            log.exception("run failed")
            yield self._error("something went wrong on the server while decoding (it is logged); "
                              "what the page showed is kept — try again or change the settings")
        finally:
            if CLICKS.latest(session) == mine:  # a newer run of this session keeps its own Stop
                STOPS.end(session)

    def ran(self, request: gr.Request):
        """A run's events ended: Run comes back unless a newer run of the session is still under way."""
        return gr.Button(interactive=True) if CLICKS.end(session_id(request)) else gr.update()

    def ask(self, request: gr.Request):
        """Run was clicked: it greys out, and a run of this session still measuring its comparison stops."""
        CLICKS.ask(session_id(request))
        return gr.Button(interactive=False)

    def _run_on_zero_gpu(self, model, prompt, session, options, alpha, c, c_hat, history):
        """On a ZeroGPU Space: the run and plain decoding on its settings in one GPU call
        (``zerogpu.decode_run``; ``history``: whose suffix outputs it reads and joins), then the page plays its
        rounds from the first."""
        p = self.page
        asked = zerogpu.ENTRY_POINTS["decode_run"](model, prompt, history, options, True, {})
        yield {p.status: f"◷ Waiting for a ZeroGPU GPU (asking for up to {asked} s of your GPU quota). The whole run "
                         "and plain decoding on the same settings decode there in one go; then the rounds play here. "
                         "Stop cannot end a run that is on the GPU."}
        started = time.perf_counter()
        trace, baseline = zerogpu.decode(model, prompt, history, options, baseline=True)
        if baseline is not None:
            BASELINES.put(baseline)
        updates = self._finished(trace, baseline, alpha, c, c_hat, session,
                                 which="Compared with plain decoding run right after it on the same GPU, in the same call.")
        updates[p.keeping] = gr.HTML(visible=False)  # the copy's race runs on the CPU's page only (``comparing``)
        updates[p.status] = (f"Decoded on a ZeroGPU GPU ({trace.device}); the call took {time.perf_counter() - started:.1f} "
                             f"s with the wait. Its rounds play here from the first (Pause stops them).\n\n"
                             f"{updates[p.status]}")
        if len(trace.rounds) > 1:  # play it: the page shows the rounds as if they were decoding now
            updates.update({p.round_slider: slider_for(len(trace.rounds), 1), **self._round(trace, 0), **self._play()})
        yield updates

    def stop(self, shown: str | None, request: gr.Request):
        """Ask this session's decode to stop after its current round (it keeps what it decoded). With
        nothing running, say so under what the status already shows (a run's summary stays)."""
        if STOPS.request(session_id(request)):
            return "■ Stopping after the current round…"
        kept = (shown or "").split(NOTHING_TO_STOP)[0].rstrip()
        return f"{kept}\n\n{NOTHING_TO_STOP}" if kept else NOTHING_TO_STOP

    def _live(self, trace, baseline, status: str, plots: bool, first: bool, following: bool = True) -> dict:
        """While decoding: the token view and the slider follow the newest round — until the user steps
        to a round (``following`` off): then only the slider's range grows and the page stays on that
        round. The plots (the costly part) only every ``LIVE_PLOTS_EVERY_S``."""
        p = self.page
        n = len(trace.rounds)
        updates = {p.trace_state: trace, p.status: status}
        if following:
            updates.update({p.round_slider: slider_for(n), p.tokens: viz.token_html(trace, n - 1)})
        else:
            updates[p.round_slider] = gr.Slider(maximum=max(n, 2))
        if first:
            updates[p.banner] = viz.method_banner(trace.method, explorer.METHODS.get(trace.method), trace.settings.lossy)
            updates[p.why] = "**Why this speed** is explained here when the run ends."
            updates[p.audit] = "**Lossless audit** when the run ends."
            updates.update(self._pause())
        if plots:
            updates[p.latency] = viz.latency_figure(trace, baseline)
            if following:
                updates.update(self._round(trace, n - 1))
        return updates


def _waited(line: str, seconds: float, said: str | None) -> str:
    """A status while the page waits on blocking work: what, for how long, and the one-time work under way."""
    text = f"{line} {seconds:.0f} s"
    if said:
        text += (f"\n\nOne-time work on this machine (later runs skip it): {viz.safe_markdown(said)}")
    return text


def pace_at(trace, index: int) -> float:
    """The machine's pace (``explorer.pace``) a run recorded at ``index`` (0: its start, -1: its end), or now."""
    return trace.pace_ms[index] if trace.pace_ms else probe_ms()
