"""Moving through a trace's rounds: the slider, previous / next, the next refusal, play and pause, and the
guided round's steps (the Understand tab)."""

from __future__ import annotations

import gradio as gr

from explorer import viz

from .session import STOPS, session_id
from .showing import Showing, round_index


class Stepping(Showing):
    """The round slider, its buttons, play, and the guided round."""

    def show_round(self, trace, value, request: gr.Request):
        """The user moved the slider: redraw the token view, the round detail and the method views."""
        STOPS.step(session_id(request))
        if trace is None or not trace.rounds:
            return {}
        return self._round(trace, round_index(trace, value))

    def step(self, trace, value, delta: int):
        """Previous / next: move one round and draw it."""
        if trace is None or not trace.rounds:
            return {}
        index = min(max(round_index(trace, value) + delta, 0), len(trace.rounds) - 1)
        return {self.page.round_slider: index + 1, **self._round(trace, index)}

    def next_refusal(self, trace, value, request: gr.Request):
        """Jump to the next round where a draft was refused (or rolled back), wrapping to the first."""
        STOPS.step(session_id(request))
        if trace is None or not trace.rounds:
            return {}
        index = viz.next_refusal(trace, round_index(trace, value))
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

    def guide(self, trace, value, step: int) -> tuple:
        """Show steps 1 … ``step`` of the selected round (clipped to the four steps)."""
        step = max(1, min(int(step), len(viz.GUIDE_STEPS)))
        return step, viz.guided_round_html(trace, round_index(trace, value), step)

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
        updates = self._play()
        if round_index(trace, value) >= len(trace.rounds) - 1:
            updates.update({p.round_slider: 1, **self._round(trace, 0)})
        return updates

    def tick(self, trace, value):
        """One step of play; stops at the last round."""
        if trace is not None and round_index(trace, value) < len(trace.rounds) - 1:
            return self.step(trace, value, +1)
        return self._pause()
