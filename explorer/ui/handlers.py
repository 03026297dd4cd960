"""Event handlers: page inputs → engine / viz → ``{component: value}`` updates.

Thin by design: decoding is ``explorer.stream``, every picture is ``explorer.viz``. What lives here is
the wiring: streaming rounds to the page while they decode, Stop, stepping through rounds, the
autoregressive baseline, trace files, and turning every user error into one readable line on the page.
"""

from __future__ import annotations

import html
import logging
import time
from typing import TYPE_CHECKING, Iterator

import gradio as gr

import explorer
from explorer.errors import one_line
from explorer import methods, viz
from explorer.audit import greedy_audit
from explorer.pairs import GPU_PAIR, get_pair
from explorer.engine.controllers import DEFAULT_CONTROLLER, DEFAULT_GAMMA
from explorer.limits import MAX_GAMMA, MAX_SESSION_TRACE_BYTES
from explorer.pace import probe_ms
from explorer.viz.audit import greedy_audit_text
from explorer.words import plural

from .baseline import BASELINES, baseline_stream
from .inputs import decode_options, precision
from . import jobs, trace_files, zerogpu
from .trace_files import write_trace_file
from .session import RUNS, STOPS, history_session, release_state, session_id
from .views import slot_updates

if TYPE_CHECKING:
    from .page import Page

log = logging.getLogger(__name__)

# Live updates while decoding. The page is drawn in the process that decodes, and drawing competes with
# the decode for the CPU (and Python's GIL), which would slow the very rounds being timed: the token view
# (cheap) follows every few rounds, the figures (tens of ms each) every couple of seconds.
LIVE_TEXT_EVERY_S = 0.3
LIVE_PLOTS_EVERY_S = 2.0
NOTHING_TO_STOP = "■ Nothing is running: Stop ends a decode after its current round."


class Handlers:
    """The page's event handlers, bound to its components (``Page``)."""

    def __init__(self, page: "Page"):
        self.page = page

    # -- run and stop -------------------------------------------------------------------------------

    def run(self, values: dict, request: gr.Request):
        """Decode, streaming rounds to the page; then measure the autoregressive baseline once. ``values``:
        the page's inputs by component (``Page.run_inputs``)."""
        p = self.page
        model = values[p.model]
        alpha, c, c_hat = values[p.theory_alpha], values[p.theory_c], values[p.theory_c_hat]
        session = session_id(request)
        STOPS.begin(session)
        try:
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
            yield {p.status: f"◷ Loading {viz.safe_markdown(model)} and encoding the prompt…"}
            decoding = explorer.stream(model, prompt, session=history_session(request), **options)
            decoding.watch_pace()  # the machine's pace as it decodes: is a cached baseline comparable, did it hold?
            started = time.perf_counter()
            last_text = last_plots = 0.0
            baseline, which = None, ""
            for r in decoding.steps():
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
            yield self._finished(trace, baseline, alpha, c, c_hat, session, keep_round=STOPS.stepped(session),
                                 which=which)
            if baseline is None and not stopped and trace.rounds:
                yield from self._measure_baseline(trace, alpha, c, c_hat, session, which)
        except explorer.ExplorerError as err:
            yield self._error(str(err))
        except Exception:  # unexpected: the stack trace goes to the log, never to the page
            log.exception("run failed")
            yield self._error("something went wrong on the server while decoding (it is logged); "
                              "what the page showed is kept — try again or change the settings")
        finally:
            STOPS.end(session)

    def _run_on_zero_gpu(self, model, prompt, session, options, alpha, c, c_hat, history):
        """On a ZeroGPU Space: the run and plain decoding on its settings in one GPU call
        (``zerogpu.decode_run``; ``history``: whose suffix outputs it reads and joins), then the page plays its
        rounds from the first."""
        p = self.page
        asked = zerogpu.ENTRY_POINTS["decode_run"](model, prompt, history, options, True, [])
        yield {p.status: f"◷ Waiting for a ZeroGPU GPU (asking for up to {asked} s of your GPU quota). The whole run "
                         "and plain decoding on the same settings decode there in one go; then the rounds play here. "
                         "Stop cannot end a run that is on the GPU."}
        started = time.perf_counter()
        trace, baseline = zerogpu.decode(model, prompt, history, options, baseline=True)
        if baseline is not None:
            BASELINES.put(baseline)
        updates = self._finished(trace, baseline, alpha, c, c_hat, session,
                                 which="Compared with plain decoding run right after it on the same GPU, in the same call.")
        updates[p.status] = (f"Decoded on a ZeroGPU GPU ({trace.device}); the call took {time.perf_counter() - started:.1f} "
                             f"s with the wait. Its rounds play here from the first (Pause stops them).\n\n"
                             f"{updates[p.status]}")
        if len(trace.rounds) > 1:  # play it: the page shows the rounds as if they were decoding now
            updates.update({p.round_slider: _slider(len(trace.rounds), 1), **self._round(trace, 0), p.timer: gr.Timer(active=True),
                            p.play_btn: gr.Button(value="❚❚ Pause"), p.playing: True})
        yield updates

    def stop(self, shown: str | None, request: gr.Request):
        """Ask this session's decode to stop after its current round (it keeps what it decoded). With
        nothing running, say so under what the status already shows (a run's summary stays)."""
        if STOPS.request(session_id(request)):
            return "■ Stopping after the current round…"
        kept = (shown or "").split(NOTHING_TO_STOP)[0].rstrip()
        return f"{kept}\n\n{NOTHING_TO_STOP}" if kept else NOTHING_TO_STOP

    def _measure_baseline(self, trace, alpha, c, c_hat, session, which: str):
        """Plain decoding on the run's prompt and settings, right after it (none cached, or the machine's
        pace changed since the cached one: ``which`` says which)."""
        p = self.page
        yield {p.status: f"{viz.run_summary(trace)}\n\n{which}\n\n◷ Measuring plain decoding on the same "
                         "prompt and settings (cached for later runs while the machine keeps this pace)…"}
        replaced = BASELINES.get(trace) is not None  # a cached one taken at another pace
        decoding = baseline_stream(trace)
        last_shown = time.perf_counter()
        for r in decoding:
            if STOPS.pending(session):
                yield {p.status: f"{viz.run_summary(trace)}\n\nBaseline skipped (stopped)."}
                return
            if time.perf_counter() - last_shown >= 1.0:
                last_shown = time.perf_counter()
                yield {p.status: f"{viz.run_summary(trace)}\n\n◷ Measuring the autoregressive baseline… "
                                 f"{sum(len(x.emitted) for x in decoding.rounds)} / {trace.settings.max_new_tokens} tokens"}
        BASELINES.put(decoding.trace(), pace_at(decoding.trace(), 0))
        baseline = BASELINES.get(trace)
        measured = ("Compared with plain decoding measured right after this run, on the same prompt and settings"
                    + (" (the machine's pace had changed since the cached one)." if replaced else "."))
        yield {
            p.latency: viz.latency_figure(trace, baseline),
            p.theory: viz.theory_figure(alpha, c, c_hat, trace, baseline),
            p.status: f"{viz.run_summary(trace, baseline)}\n\n{measured}",
            p.why: viz.speed_explanation(trace, baseline),
            p.audit: audit_words(trace, baseline),
        }

    # -- what a trace shows -------------------------------------------------------------------------

    def _live(self, trace, baseline, status: str, plots: bool, first: bool, following: bool = True) -> dict:
        """While decoding: the token view and the slider follow the newest round — until the user steps
        to a round (``following`` off): then only the slider's range grows and the page stays on that
        round. The plots (the costly part) only every ``LIVE_PLOTS_EVERY_S``."""
        p = self.page
        n = len(trace.rounds)
        updates = {p.trace_state: trace, p.status: status}
        if following:
            updates.update({p.round_slider: _slider(n), p.tokens: viz.token_html(trace, n - 1)})
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

    def _finished(self, trace, baseline, alpha, c, c_hat, session: str, keep_round: bool = False,
                  which: str = "") -> dict:
        """A whole trace on the page: state, every view at the round it opens on (the first refusal:
        ``viz.opening_round``; with ``keep_round``, the round the user stepped to while it decoded, whose
        views already show), and its file to download. ``which``: a sentence on the baseline it is
        compared with (``BaselineCache.fresh``)."""
        p = self.page
        n = len(trace.rounds)
        opening = viz.opening_round(trace)
        path = write_trace_file(trace, session)
        dropped = RUNS.add(session, trace, path.stat().st_size) if trace.rounds else 0  # the Compare tab's "your runs"
        updates = {
            p.trace_state: trace,
            p.round_slider: _slider(n, opening + 1),
            p.banner: viz.method_banner(trace.method, explorer.METHODS.get(trace.method), trace.settings.lossy),
            p.latency: viz.latency_figure(trace, baseline),
            p.theory: viz.theory_figure(alpha, c, c_hat, trace, baseline),
            p.status: viz.run_summary(trace, baseline) + (f"\n\n{which}" if which else ""),
            p.why: viz.speed_explanation(trace, baseline),
            p.audit: audit_words(trace, baseline),
            p.download: gr.DownloadButton(value=str(path), interactive=True),
        }
        if dropped:  # memory for "your runs" is bounded in bytes: say what made room
            kept = ("this one is too large to keep there" if dropped < 0 else
                    f"{dropped} earlier run{'s' if dropped > 1 else ''} of this session dropped from it to make room")
            updates[p.status] += (f"\n\n(\"Your runs\" in Compare keeps at most "
                                  f"{MAX_SESSION_TRACE_BYTES // 2**20} MB of traces a session: {kept}.)")
        if keep_round:  # rounds are immutable: the views drawn for the user's round stay true
            updates[p.round_slider] = gr.Slider(maximum=max(n, 2), interactive=n > 0)
        else:
            updates.update(self._round(trace, opening))
        return updates

    def _round(self, trace, index: int) -> dict:
        p = self.page
        return {
            p.tokens: viz.token_html(trace, index),
            p.round_detail: viz.round_detail_figure(trace, index),
            p.guided: viz.guided_round_html(trace, index),
            p.guide_step: len(viz.GUIDE_STEPS),
            **slot_updates(p.view_slots, trace, index),
        }

    def _error(self, message: str) -> dict:
        """One line in a toast and in the status; the message may echo what the user typed or uploaded,
        so it is shown as literal text (``<name>`` stays visible, no tag can open)."""
        message = one_line(message)
        gr.Warning(html.escape(message))
        return {self.page.status: f"⚠️ {viz.safe_markdown(message)}"}

    # -- stepping through rounds --------------------------------------------------------------------

    def show_round(self, trace, value, request: gr.Request):
        """The user moved the slider: redraw the token view, the round detail and the method views."""
        STOPS.step(session_id(request))
        if trace is None or not trace.rounds:
            return {}
        return self._round(trace, _round_index(trace, value))

    def step(self, trace, value, delta: int):
        """Previous / next: move one round and draw it."""
        if trace is None or not trace.rounds:
            return {}
        index = min(max(_round_index(trace, value) + delta, 0), len(trace.rounds) - 1)
        return {self.page.round_slider: index + 1, **self._round(trace, index)}

    def next_refusal(self, trace, value, request: gr.Request):
        """Jump to the next round where a draft was refused (or rolled back), wrapping to the first."""
        STOPS.step(session_id(request))
        if trace is None or not trace.rounds:
            return {}
        index = viz.next_refusal(trace, _round_index(trace, value))
        if index is None:
            gr.Info("No draft was refused in this run.")
            return {}
        return {self.page.round_slider: index + 1, **self._round(trace, index)}

    def previous_round(self, trace, value, request: gr.Request):
        STOPS.step(session_id(request))
        return self.step(trace, value, -1)

    def next_round(self, trace, value, request: gr.Request):
        STOPS.step(session_id(request))
        return self.step(trace, value, +1)

    # -- the guided round (Understand tab) --------------------------------------------------------

    def guide(self, trace, value, step: int) -> tuple:
        """Show steps 1 … ``step`` of the selected round (clipped to the four steps)."""
        step = max(1, min(int(step), len(viz.GUIDE_STEPS)))
        return step, viz.guided_round_html(trace, _round_index(trace, value), step)

    def play_guide(self, trace, value, step):
        """From step 1, one step per tick of the guide's timer."""
        return (*self.guide(trace, value, 1), gr.Timer(active=trace is not None))

    def guide_tick(self, trace, value, step):
        step, shown = self.guide(trace, value, step + 1)
        return step, shown, gr.Timer(active=step < len(viz.GUIDE_STEPS))

    def toggle_play(self, trace, value, playing):
        """Play from the selected round (from the first when at the end) or pause."""
        p = self.page
        if playing or trace is None or len(trace.rounds) < 2:
            return self._pause()
        updates = {p.timer: gr.Timer(active=True), p.play_btn: gr.Button(value="❚❚ Pause"), p.playing: True}
        if _round_index(trace, value) >= len(trace.rounds) - 1:
            updates.update({p.round_slider: 1, **self._round(trace, 0)})
        return updates

    def tick(self, trace, value):
        """One step of play; stops at the last round."""
        if trace is not None and _round_index(trace, value) < len(trace.rounds) - 1:
            return self.step(trace, value, +1)
        return self._pause()

    def _pause(self) -> dict:
        p = self.page
        return {p.timer: gr.Timer(active=False), p.play_btn: gr.Button(value="▶ Play"), p.playing: False}

    # -- theory, method, trace files ----------------------------------------------------------------

    def theory(self, alpha, c, c_hat, trace):
        baseline = BASELINES.get(trace) if trace is not None else None
        return {self.page.theory: viz.theory_figure(alpha, c, c_hat, trace, baseline)}

    def method_changed(self, method, model="default", draft=None, gamma=None, controller=None):
        """The banner describes the chosen method and the controls follow its record: no drafter for a
        method that drafts by itself (said in the box); a preset method (eesd, eagle) fills in what it
        runs for this model; any other keeps a draft the user typed when it is one the method runs, and
        otherwise switches to the method's default draft and says why, and γ and the controller go back
        to the defaults (a preset's γ cap or Thompson controller does not carry over). γ and the
        controller show only where they apply."""
        p = self.page
        chosen = methods.discover().get(method)
        if chosen is None:
            return {}
        takes_draft = chosen.draft != "none"
        defaults = chosen.make_options({})
        note = f"1 to {MAX_GAMMA}" if chosen.uses_gamma else f"not used by {method}"
        updates = {p.banner: viz.method_banner(method, chosen.summary, chosen.is_lossy(defaults)),
                   p.draft: gr.Dropdown(interactive=takes_draft, info=None),
                   # what does not apply is hidden, not just greyed out (γ and the controller for bita, say)
                   p.gamma: gr.Number(interactive=chosen.uses_gamma, visible=chosen.uses_gamma, info=note),
                   p.controller: gr.Dropdown(interactive=chosen.controller, visible=chosen.controller),
                   **p.options.visible_for(method)}
        typed = str(draft or "").strip()
        if not takes_draft:  # the box shows no draft rather than one that would not run
            updates[p.draft] = gr.Dropdown(value="", interactive=False, info=chosen.draft_words or None, allow_custom_value=True)
        elif chosen.preset is not None:  # eesd, eagle: what the method runs for this model
            try:
                preset = explorer.method_preset(method, (model or "default").strip())
            except explorer.ExplorerError as err:
                return {**updates, p.status: f"⚠️ {viz.safe_markdown(err)}"}
            updates.update({p.draft: gr.Dropdown(value=preset["draft"], interactive=True, info=None, allow_custom_value=True),
                            p.controller: gr.Dropdown(value=preset["controller"], interactive=True, visible=True),
                            p.gamma: gr.Number(value=preset["gamma"], interactive=True, visible=True, info=note),
                            p.status: f"{method.upper()} preset: {preset['draft']}, {preset['controller']}, γ cap "
                                      f"{preset['gamma']}. {preset.get('why', '')}"})
        else:
            said = []
            if not chosen.accepts_draft(typed, defaults):
                updates[p.draft] = gr.Dropdown(value=chosen.default_draft, interactive=True, info=None,
                                               allow_custom_value=True)
                said.append(f"{chosen.draft_words} " if chosen.draft_words else "")
                said.append(f"The drafter is now {chosen.default_draft}.")
            reset = []
            if chosen.uses_gamma and gamma is not None and gamma != DEFAULT_GAMMA:
                updates[p.gamma] = gr.Number(value=DEFAULT_GAMMA, interactive=True, visible=True, info=note)
                reset.append(f"γ {DEFAULT_GAMMA}")
            if chosen.controller and controller is not None and controller != DEFAULT_CONTROLLER:
                updates[p.controller] = gr.Dropdown(value=DEFAULT_CONTROLLER, interactive=True, visible=True)
                reset.append(f"controller {DEFAULT_CONTROLLER}")
            if reset:
                said.append(f" Back to the defaults for {method}: {' and '.join(reset)} (set them again to "
                            "change them).")
            if said:
                updates[p.status] = viz.safe_markdown("".join(said).strip())
        return updates

    def use_pair(self, name: str = GPU_PAIR) -> dict:
        """A model pair (``explorer.pairs``) on the page: its target, speculative decoding with its first draft and
        its γ, and why drafting pays there in the status."""
        p, pair = self.page, get_pair(name)
        return {p.model: pair.target, p.method: "speculative",
                p.draft: gr.Dropdown(value=pair.drafts[0], interactive=True, allow_custom_value=True),
                p.gamma: gr.Number(value=pair.gamma, interactive=True, visible=True),
                p.status: viz.safe_markdown(f"{pair.why()} {pair.fetch[:1].upper() + pair.fetch[1:] + '. ' if pair.fetch else ''}"
                                            "Press Run.")}

    def upload(self, data, alpha, c, c_hat, request: gr.Request):
        """Replay an uploaded trace; a bad file leaves the session's current trace as it was. Either way the Traces
        tab, where the upload was made, says what happened (the replay itself is in Watch)."""
        if data is None:
            return {}
        try:
            trace = explorer.load_trace(data)
        except explorer.ExplorerError as err:
            return self._refused(f"{err} (your current trace is kept)")
        except Exception:
            log.exception("upload failed")
            return self._refused("could not read the file as a trace (your current trace is kept)")
        p = self.page
        updates = self._finished(trace, BASELINES.get(trace), alpha, c, c_hat, session_id(request))
        updates[p.status] = f"Replaying an uploaded trace (no model needed). {updates[p.status]}"
        s = trace.summary
        updates[p.trace_note] = (
            f"✓ Replaying **{viz.safe_markdown(trace.method)}**"
            + (f" with {viz.safe_markdown(trace.draft)}" if trace.draft else "")
            + f" on {viz.safe_markdown(trace.model)}: {plural(len(trace.rounds), 'round')}, "
            f"{plural(s.new_tokens, 'token')}. Open the **Watch** tab to step through it (its views, audit and "
            "figures are there too).")
        return updates

    def _refused(self, message: str) -> dict:
        """A refused upload: the one line in the status, the toast and on the Traces tab."""
        updates = self._error(message)
        updates[self.page.trace_note] = updates[self.page.status]
        return updates

    def api_decode(self, prompt: str, method: str = "speculative", draft: str | None = "early-exit:8",
                   gamma: int = DEFAULT_GAMMA, temperature: float = 0.0, max_new_tokens: int = 64, seed: int = 0,
                   model: str = "default", request: gr.Request = None) -> Iterator[str]:
        """Decode a prompt with a speculative-decoding method and return its per-round trace as JSON.

        Args:
            prompt: the text to continue; it is wrapped in the model's chat template.
            method: ar, speculative, eesd, eagle, eagle-tree, bild, bita, suffix, lookahead, lenient, hierarchical,
                beam or synthetic.
            draft: the drafter: early-exit:N, feature-head, prompt-lookup:n or model:<name>; ar and bita
                ignore it.
            gamma: tokens drafted per round, 1 to 64.
            temperature: 0 for greedy decoding, else the sampling temperature (at most 100).
            max_new_tokens: how many tokens to generate, 1 to 4096.
            seed: the random seed, 0 to 2^63 - 1.
            model: default (SmolLM2-135M-Instruct, offline) or hf:ORG/NAME.
        Returns:
            One progress line per round (or per step of beam search), then the trace as JSON (schema spec-explorer/trace@2; what
            Client.predict returns, and explorer.load_trace reads back).
        """
        # A generator on purpose: Gradio resumes it once per round, so a cancelled job or a client that
        # went away ends the decode at the next round instead of running it to the end on cores whose
        # concurrency slot was already given to someone else.
        try:
            # no controller: the engine's default (fixed γ), except eesd's Thompson sampling from its preset
            options = decode_options(method, draft, gamma, None, temperature, 0, 1.0, max_new_tokens, seed)
            # the caller's session (a suffix run drafts from its own earlier outputs, never another caller's; an MCP
            # call, which cannot be told from other MCP calls, from none)
            session = history_session(request, api=True)
            if zerogpu.ON_ZERO_GPU:  # the whole decode in one GPU call
                yield "decoding on a ZeroGPU GPU (the whole run in one call)"
                yield zerogpu.decode(model, prompt, session, options, baseline=False)[0].to_json()
                return
            decoding = explorer.stream(model, prompt, session=session, **options)
            tokens = searched = 0
            for r in decoding.steps():
                if r is None:  # a step of work between rounds (beam search): a cancelled job ends here
                    searched += 1
                    yield f"searching: {searched} search rounds without a newly settled round"
                    continue
                tokens += len(r.emitted)
                yield f"round {r.index + 1}: {tokens} / {options['max_new_tokens']} tokens"
            yield decoding.trace().to_json()
        except explorer.ExplorerError as err:
            raise gr.Error(one_line(err), print_exception=False) from None  # API clients get the plain line
        except Exception:
            log.exception("api decode failed")
            raise gr.Error("something went wrong on the server while decoding (it is logged)",
                           print_exception=False) from None


# -- helpers ----------------------------------------------------------------------------------------


def pace_at(trace, index: int) -> float:
    """The machine's pace (``explorer.pace``) a run recorded at ``index`` (0: its start, -1: its end), or now."""
    return trace.pace_ms[index] if trace.pace_ms else probe_ms()


def audit_words(trace, baseline) -> str:
    """The greedy audit of a trace against its baseline, in words (``explorer.audit``)."""
    return greedy_audit_text(trace, baseline, greedy_audit(trace, baseline))


def forget_session(request: gr.Request) -> None:
    """The page was closed: its jobs stop at their next check, its runs, trace files and Gradio state go."""
    session = session_id(request)
    jobs.close(session)
    RUNS.forget(session)
    trace_files.forget_files(session)
    release_state(request)


def _slider(n_rounds: int, value: int | None = None) -> gr.Slider:
    """The round slider for a trace of ``n_rounds``, at round ``value`` (default: the last). Gradio's
    slider needs minimum < maximum, so a one-round trace gets a range of two and the handlers clamp."""
    value = max(n_rounds, 1) if value is None else value
    return gr.Slider(minimum=1, maximum=max(n_rounds, 2), value=value, step=1, interactive=n_rounds > 0)


def _round_index(trace, value) -> int:
    """The slider's 1-based round number as a 0-based index into the trace's rounds."""
    try:
        chosen = int(round(float(value)))
    except (TypeError, ValueError):
        chosen = len(trace.rounds)
    return max(0, min(chosen - 1, len(trace.rounds) - 1))
