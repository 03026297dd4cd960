"""The Compare tab's "your runs": this session's finished runs and uploaded traces, each against plain
decoding on its own prompt and settings (the cached baseline), shown in the Compare view as a report."""

from __future__ import annotations

import html
from dataclasses import dataclass

import gradio as gr

from explorer import machine
from explorer.bench import position_rates
from explorer.errors import ExplorerError
from explorer.limits import MAX_SPEC_CHARS
from explorer.quality import token_agreement
from explorer.viz import measured_speedup
from explorer.words import plural

from .baseline import BASELINES
from .sections import CompareView
from .session import RUNS, session_id

NO_RUNS = ("No finished run with a plain-decoding baseline in this session yet: run a prompt in the Watch tab "
           "(its baseline runs right after it), then come back.")


@dataclass
class MyRunsSection:
    button: gr.Button
    words: gr.Markdown


def runs_report(traces: list) -> tuple[dict | None, int]:
    """(a benchmark report of the runs that have a plain-decoding baseline they can be weighed against, how many
    had none: no baseline, or one timed at another pace of the machine, ``viz.trust``)."""
    rows, missing = [], 0
    for k, trace in enumerate(traces, 1):
        base = BASELINES.get(trace)
        s = trace.summary
        speedup = measured_speedup(trace, base)
        if speedup is None:
            missing += 1
            continue
        rows.append({
            "system": _clipped(f"run {k}: {trace.method}" + (f" {trace.draft}" if trace.draft else "")),
            "method": trace.method, "draft": trace.draft, "tokens_per_s": s.tokens_per_s,
            "speedup_vs_ar": speedup, "acceptance_rate": s.acceptance_rate,
            "acceptance_by_position": position_rates(trace.rounds),
            "alpha_hat": s.alpha_hat, "tokens_per_target_forward": s.tokens_per_target_forward, "c": s.c_measured,
            "predicted_speedup": s.predicted_speedup,
            "identical_to_ar": list(trace.output_ids) == list(base.output_ids) if trace.settings.temperature == 0
            else None,
            "agreement_with_ar": token_agreement(list(trace.output_ids), list(base.output_ids))
            if trace.settings.temperature == 0 and list(trace.output_ids) != list(base.output_ids) else None,
        })
    if not rows:
        return None, missing
    prompts = len({tuple(t.prompt_ids) for t in traces})
    return {"rows": rows, "meta": {"source": "your runs", "model": traces[-1].model, "prompts": prompts,
                                   "repeats": 1, "dtype": traces[-1].dtype, "machine": machine.describe()}}, missing


def _clipped(name: str) -> str:
    """A system's name within a report's bound (an uploaded trace's draft may name 1000 characters)."""
    return name if len(name) <= MAX_SPEC_CHARS else name[: MAX_SPEC_CHARS - 1] + "…"


def my_runs_section() -> MyRunsSection:
    """The section's components (call inside the Blocks context)."""
    gr.Markdown("### Your runs", elem_classes=["section-title"])
    with gr.Row(equal_height=True):
        button = gr.Button("Show this session's runs in the Compare view", elem_id="my-runs", scale=0, min_width=320)
        words = gr.Markdown("Every run you finish (or trace you upload) in this session, each against plain decoding "
                            "on its own prompt and settings.", elem_id="my-runs-words")
    return MyRunsSection(button, words)


def wire_my_runs(section: MyRunsSection, compare: CompareView) -> None:
    def show(request: gr.Request):
        traces = RUNS.of(session_id(request))
        report, missing = runs_report(traces)
        if report is None:
            return {section.words: NO_RUNS if not missing else
                    f"None of this session's {plural(missing, 'run')} can be weighed against plain decoding: none has "
                    "run on their settings yet, or the machine's pace changed between a run and it (the race, above, "
                    "measures fairly)."}
        note = (f" ({missing} left out: no plain decoding on their settings yet, or one timed while the machine ran at "
                "another pace)") if missing else ""
        try:
            shown = compare.show(report)
        except ExplorerError as err:  # a report of this session's own runs that fails the Compare view's checks
            return {section.words: html.escape(f"Your runs cannot be shown: {err}")}
        return {section.words: html.escape(f"{len(report['rows'])} of your runs, newest last{note}."), **shown}

    section.button.click(show, outputs=[section.words, *compare.outputs()],
                         show_progress="hidden", api_visibility="private")
