"""Each method's options on the page, built from the method registry (``explorer/methods``).

A method with options gets one accordion (``#<method>-settings``), shown while it is the chosen method,
with one control per option (``#<keyword>`` with dashes): a radio for choices, a slider where the
option names the range a form should offer (``option(..., slider=(low, high, step))``), else a number
box. An option that may be absent while it has a default (BiLD's α_RB: never roll back) gets a checkbox
beside it (``#no-<keyword>``). Options marked ``page=False`` (BiTA's tokens file: a path on the server)
are not offered. A new method's options appear here without an edit.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import gradio as gr

from explorer import methods

from .inputs import number, whole


@dataclass
class OptionsPanel:
    boxes: dict[str, gr.Accordion]  # method name → its accordion
    controls: dict[str, gr.components.Component]  # keyword → its control
    absent: dict[str, gr.Checkbox]  # keyword → "no value" checkbox, for options that may be absent

    def components(self) -> list:
        return [*self.controls.values(), *self.absent.values()]

    def visible_for(self, method: str) -> dict:
        """Show the chosen method's accordion, hide the others."""
        return {box: gr.Accordion(visible=name == method) for name, box in self.boxes.items()}

    def keywords(self, method: str, values: dict) -> dict:
        """The chosen method's options as ``explorer.stream`` keywords, from the page's values (a dict by
        component); numbers must be whole where the option counts. Ranges are the method's to check."""
        chosen = methods.get(method)
        given = {}
        for keyword, f in chosen.keywords().items():
            if keyword not in self.controls:
                continue
            if keyword in self.absent and values.get(self.absent[keyword]):
                given[keyword] = None
                continue
            value = values.get(self.controls[keyword])
            kind, name = f.metadata["kind"], f.metadata["symbol"] or f.metadata["label"] or keyword
            given[keyword] = whole(name, value) if kind is int else number(name, value) if kind is float else value
        return given


def build_options_panel(selected: str) -> OptionsPanel:
    """One accordion per method with options (call inside the Blocks context)."""
    boxes, controls, absent = {}, {}, {}
    for name, method in methods.discover().items():
        fields = [(k, f) for k, f in method.keywords().items() if f.metadata["page"]]
        if not fields:
            continue
        with gr.Accordion(method.options.title or f"{name}: options", open=True, visible=name == selected, elem_id=f"{name}-settings") as box:
            for row in _rows(fields):
                with gr.Row():
                    for keyword, f in row:
                        controls[keyword] = _control(keyword, f)
                        if _may_be_absent(f):
                            absent[keyword] = gr.Checkbox(False, label=_absent_label(f), elem_id="no-" + _dashes(keyword))
        boxes[name] = box
    return OptionsPanel(boxes, controls, absent)


def _control(keyword: str, f: dataclasses.Field):
    meta = f.metadata
    label = meta["label"] or keyword
    info = meta["help"] + (f" ({meta['paper']})" if meta["paper"] else "")
    elem_id = _dashes(keyword)
    if meta["choices"] is not None:
        return gr.Radio(list(meta["choices"]), value=f.default, label=label, info=info, elem_id=elem_id)
    if meta["slider"] is not None:
        low, high, step = meta["slider"]
        value = f.default if f.default is not None else high  # none on a slider: its end (BiTA: every mask)
        return gr.Slider(low, high, value=value, step=step, label=label, info=info, elem_id=elem_id,
                         precision=0 if meta["kind"] is int else None)
    return gr.Number(f.default, label=label, info=info + f" · {methods.describe(f, with_none=False)}",
                     elem_id=elem_id)


def _may_be_absent(f: dataclasses.Field) -> bool:
    return bool(f.metadata["none"]) and f.default is not None


def _rows(fields: list) -> list[list]:
    """Two controls a row; an option with its "no value" checkbox takes a row of its own."""
    rows, pair = [], []
    for item in fields:
        if _may_be_absent(item[1]):
            rows.append([item])
            continue
        pair.append(item)
        if len(pair) == 2:
            rows.append(pair)
            pair = []
    return rows + ([pair] if pair else [])


def _absent_label(f: dataclasses.Field) -> str:
    """"never roll back (α_RB = ∞)": what no value means, without its aside, and its symbol's ∞."""
    meta = f.metadata
    words = meta["none"].split(" (")[0]
    return words + (f" ({meta['symbol']} = ∞)" if meta["infinite"] and meta["symbol"] else "")


def _dashes(keyword: str) -> str:
    return keyword.replace("_", "-")
