"""Slots on the page for the registered method views (``explorer.viz.views``).

Every view gets a hidden box when the page is built; after each round change the box is shown, with the
view rendered, only for traces the view applies to. A new method's view therefore needs no edit here or
in the layout: its module in ``explorer/viz/views`` is found by ``discover``.
"""

from __future__ import annotations

import html
import logging
from dataclasses import dataclass

import gradio as gr

from explorer.viz import empty_figure
from explorer.viz.views import MethodView, discover

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ViewSlot:
    view: MethodView
    box: gr.Group
    output: gr.components.Component


def build_view_slots() -> list[ViewSlot]:
    """One hidden box per registered view (call inside the Blocks context)."""
    slots = []
    for view in discover():
        # "hidden", not False: the box and its plot stay mounted, so a plot that arrives in the same burst of
        # updates that shows the box is drawn (with visible=False a fast run's view could stay empty)
        with gr.Group(visible="hidden", elem_id=f"view-box-{view.name}", elem_classes=["method-view"]) as box:
            if view.kind == "plot":
                output = gr.Plot(elem_id=f"view-{view.name}", label=view.title, show_label=False)
            else:
                output = gr.HTML(elem_id=f"view-{view.name}", js_on_load=None)
        slots.append(ViewSlot(view, box, output))
    return slots


def slot_updates(slots: list[ViewSlot], trace, round_index: int) -> dict:
    """Show and render the views that apply to ``trace`` at ``round_index``; hide the others."""
    updates = {}
    for slot in slots:
        applies = trace is not None and bool(trace.rounds) and _applies(slot.view, trace)
        updates[slot.box] = gr.Group(visible=True if applies else "hidden")
        if applies:
            updates[slot.output] = _render(slot.view, trace, round_index)
    return updates


def _applies(view: MethodView, trace) -> bool:
    try:
        return bool(view.applies(trace))
    except Exception:  # a broken view must not take the page down with it
        log.exception("method view %r: applies() failed", view.name)
        return False


def _render(view: MethodView, trace, round_index: int):
    try:
        return view.render(trace, round_index)
    except Exception as err:
        log.exception("method view %r: render() failed", view.name)
        message = f"This view failed: {type(err).__name__}: {err}"
        return empty_figure(view.title, message) if view.kind == "plot" else f"<p>{html.escape(message)}</p>"
