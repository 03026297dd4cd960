"""Method views: the plug-in point for a decoding method's own panels and its note on the page.

A method (EESD, BiLD, BiTA, …) adds its views with ONE module in this package; the page finds it by
itself (``discover``), gives every view a slot, and shows the slot only for traces the view applies to:

    # explorer/viz/views/bild.py
    from . import MethodView, register, register_note

    register(MethodView(
        name="bild-rollback", title="BiLD: rollback points",
        applies=lambda trace: trace.method == "bild",
        render=rollback_figure,            # (trace, round_index) -> plotly Figure (kind="plot") or HTML str
    ))
    register_note("bild", "BiLD is lossy: its output can differ from the target's.")

A method may also add its own sentence to "why this speed" (``register_words``; ``chain.py`` says which level
of a draft chain paid for what), so that the shared explanation names no method.

Views must be plain functions of the trace (no model, no torch, no gradio), so that an uploaded trace
replays them without a model.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable, Literal

VIEWS: dict[str, "MethodView"] = {}
NOTES: dict[str, "MethodNote"] = {}
WORDS: dict[str, Callable[[object], str]] = {}


@dataclass(frozen=True)
class MethodView:
    """One panel: ``render(trace, round_index)`` gives a figure (``kind="plot"``) or HTML (``"html"``)
    for traces where ``applies(trace)`` holds. ``name`` is stable: the page's element id is
    ``view-<name>``."""

    name: str
    title: str
    applies: Callable[[object], bool]
    render: Callable[[object, int], object]
    kind: Literal["plot", "html"] = "plot"
    description: str = ""


@dataclass(frozen=True)
class MethodNote:
    """What the page says above a method's results (whether a run is lossy is the run's own record:
    ``settings.lossy``)."""

    method: str
    text: str


def register(view: MethodView) -> MethodView:
    """Add (or replace, by name) a view."""
    VIEWS[view.name] = view
    return view


def register_note(method: str, text: str) -> MethodNote:
    """Set the note shown with a method's traces."""
    NOTES[method] = MethodNote(method, text)
    return NOTES[method]


def discover() -> list[MethodView]:
    """Import every module of this package (each registers its views) and list the views by name."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return sorted(VIEWS.values(), key=lambda v: v.name)


def views_for(trace) -> list[MethodView]:
    """The views that apply to a trace (none for no trace)."""
    if trace is None:
        return []
    return [v for v in discover() if v.applies(trace)]


def note_for(method: str) -> MethodNote | None:
    discover()
    return NOTES.get(method)


def register_words(method: str, words: Callable[[object], str]) -> None:
    """Add a method's own sentence to "why this speed": ``words(trace)`` in plain words from the run's numbers
    ("" where it has nothing to say), so that the shared explanation names no method."""
    WORDS[method] = words


def words_for(trace) -> str:
    """The run's method's own sentence for "why this speed" ("" for none)."""
    discover()
    words = WORDS.get(getattr(trace, "method", None))
    return words(trace) if words is not None else ""


MAX_ROUNDS_DRAWN = 256  # bars or columns a per-round panel draws at most
# rows and columns an attention-mask view draws at most (BiTA's table, lookahead's heatmap): a legal 1 024-input
# BiTA tree made a 1.3 M-cell table, a forged 1 024-node lookahead round a 1.19 M-cell figure (68 MB of JSON)
MAX_MASK_DRAWN = 160


def drawn_rounds(count: int, selected: int, most: int = MAX_ROUNDS_DRAWN) -> tuple[list[int], int]:
    """Indices of the rounds a per-round panel draws, and the stride: every round, or every k-th and the
    selected one (a legal trace has 4 096 rounds: thousands of SVG bars redrawn at every step)."""
    every = max(1, -(-count // most))
    return [j for j in range(count) if j % every == 0 or j == selected], every
