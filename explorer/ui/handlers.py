"""Event handlers: page inputs → engine / viz → ``{component: value}`` updates.

Thin by design: decoding is ``explorer.stream``, every picture is ``explorer.viz``. What lives here is
the wiring, one module per job, each a part of ``Handlers`` (the events ``layout`` wires):

    showing.py        a trace on the page (every view at a round, its file), play and pause, an error in one line
    run_handlers.py   Run (rounds streamed while they decode; a ZeroGPU run played), Stop, the baseline after
    stepping.py       the round slider, previous / next / next refusal, play, the guided round's steps
    controls.py       the method's controls from its record, a model pair, the theory figure
    trace_upload.py   an uploaded trace replayed
    api_handlers.py   the API's /decode

and every user error becomes one readable line on the page.
"""

from __future__ import annotations

import gradio as gr

from . import jobs, trace_files
from .api_handlers import ApiDecode
from .controls import Controls
from .run_handlers import Running
from .session import RUNS, release_state, session_id
from .stepping import Stepping
from .trace_upload import Uploads


class Handlers(Running, Stepping, Controls, Uploads, ApiDecode):
    """The page's event handlers, bound to its components (``Page``)."""


def forget_session(request: gr.Request) -> None:
    """The page was closed: its jobs stop at their next check, its runs, trace files and Gradio state go."""
    session = session_id(request)
    jobs.close(session)
    RUNS.forget(session)
    trace_files.forget_files(session)
    release_state(request)
