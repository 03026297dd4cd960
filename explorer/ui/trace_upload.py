"""An uploaded trace replayed on the page (no model needed); a refused file leaves the session's trace as
it was and says why in one line."""

from __future__ import annotations

import logging

import gradio as gr

import explorer
from explorer import viz
from explorer.words import plural

from .baseline import BASELINES
from .session import session_id
from .showing import Showing

log = logging.getLogger(__name__)


class Uploads(Showing):
    """The Traces tab's upload."""

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
