"""A trace on the page, shared by every handler that puts one there (a run, an upload) or moves through it:
every view at the round it opens on, its file to download, one round's views, play and pause, and a user
error as one readable line."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import gradio as gr

import explorer
from explorer import viz
from explorer.audit import greedy_audit
from explorer.errors import one_line
from explorer.limits import MAX_SESSION_TRACE_BYTES
from explorer.viz.audit import greedy_audit_text

from .baseline import BASELINES, baseline_key
from .session import RUNS
from .trace_files import write_trace_file
from .views import slot_updates

if TYPE_CHECKING:
    from .page import Page


class Showing:
    """The base of the page's handlers (``handlers.Handlers``): bound to its components, it draws traces."""

    def __init__(self, page: "Page"):
        self.page = page

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
            p.round_slider: slider_for(n, opening + 1),
            p.banner: viz.method_banner(trace.method, explorer.METHODS.get(trace.method), trace.settings.lossy),
            p.latency: viz.latency_figure(trace, baseline),
            p.theory: viz.theory_figure(alpha, c, c_hat, trace, baseline),
            p.status: viz.run_summary(trace, baseline) + (f"\n\n{which}" if which else ""),
            p.why: viz.speed_explanation(trace, baseline, self._others(trace, session)),
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

    def _others(self, trace, session: str) -> list:
        """This session's other runs on the same prompt and settings, each with its plain decoding (for "why this
        run was faster or slower than …", ``viz.explain.against_others``)."""
        key = baseline_key(trace)
        return [(t, BASELINES.get(t)) for t in RUNS.of(session) if t is not trace and baseline_key(t) == key]

    def _round(self, trace, index: int) -> dict:
        p = self.page
        return {
            p.tokens: viz.token_html(trace, index),
            p.round_detail: viz.round_detail_figure(trace, index),
            p.guided: viz.guided_round_html(trace, index),
            p.guide_step: len(viz.GUIDE_STEPS),
            **slot_updates(p.view_slots, trace, index),
        }

    def _play(self) -> dict:
        p = self.page
        return {p.timer: gr.Timer(active=True), p.play_btn: gr.Button(value="❚❚ Pause"), p.playing: True}

    def _pause(self) -> dict:
        p = self.page
        return {p.timer: gr.Timer(active=False), p.play_btn: gr.Button(value="▶ Play"), p.playing: False}

    def _error(self, message: str) -> dict:
        """One line in a toast and in the status; the message may echo what the user typed or uploaded,
        so it is shown as literal text (``<name>`` stays visible, no tag can open)."""
        message = one_line(message)
        gr.Warning(html.escape(message))
        return {self.page.status: f"⚠️ {viz.safe_markdown(message)}"}


def audit_words(trace, baseline) -> str:
    """The greedy audit of a trace against its baseline, in words (``explorer.audit``)."""
    return greedy_audit_text(trace, baseline, greedy_audit(trace, baseline))


def slider_for(n_rounds: int, value: int | None = None) -> gr.Slider:
    """The round slider for a trace of ``n_rounds``, at round ``value`` (default: the last). Gradio's
    slider needs minimum < maximum, so a one-round trace gets a range of two and the handlers clamp."""
    value = max(n_rounds, 1) if value is None else value
    return gr.Slider(minimum=1, maximum=max(n_rounds, 2), value=value, step=1, interactive=n_rounds > 0)


def round_index(trace, value) -> int:
    """The slider's 1-based round number as a 0-based index into the trace's rounds."""
    try:
        chosen = int(round(float(value)))
    except (TypeError, ValueError):
        chosen = len(trace.rounds)
    return max(0, min(chosen - 1, len(trace.rounds) - 1))
