"""The page's Audit section: is this run lossless?

The greedy audit (first divergence from plain decoding and the target's top-2 margin there) comes with
every run (``Handlers`` fill ``Page.audit``); the sampling audit runs on demand with the page's settings
(many seeded runs; χ² of the first token against the target's own distribution), with a progress bar.
"""

from __future__ import annotations

import html
import logging
import time
from dataclasses import dataclass

import gradio as gr

import explorer
from explorer.errors import one_line
from explorer.limits import MAX_JOB_SECONDS
from explorer.words import duration
from explorer import viz
from explorer.audit import MAX_AUDIT_RUNS, sampling_audit
from explorer.viz.audit import sampling_audit_figure, sampling_audit_text

from .inputs import decode_options, precision, whole
from . import zerogpu
from .long_jobs import LONG_GROUP, LongJob
from .page import Page
from .session import history_session

log = logging.getLogger(__name__)
AUDIT_TEMPERATURE = 1.0  # a greedy page is audited at this temperature (the greedy audit covers greedy)


@dataclass
class AuditSection:
    greedy: gr.Markdown
    runs: gr.Number
    button: gr.Button
    words: gr.Markdown
    plot: gr.Plot


def audit_section() -> AuditSection:
    """The section's components (call inside the Blocks context, where the section goes)."""
    gr.Markdown("### Audit: is this run lossless?", elem_classes=["section-title"])
    greedy = gr.Markdown("**Lossless audit.** Run a prompt: a greedy run is compared with plain decoding token by "
                         "token.", elem_id="audit")
    gr.Markdown("**Sampling audit.** Runs the chosen method many times with different seeds, two tokens each, and "
                "tests whether its first token follows the target model's own distribution (Pearson's χ²). Lossless "
                f"methods pass; lossy ones (BiLD, lenience) may not. A greedy page is audited at temperature "
                f"{AUDIT_TEMPERATURE:g}. A run's time depends on the method and on how busy this machine is: the "
                f"audit is priced from the pace measured here, and cut to the runs that fit in "
                f"{duration(MAX_JOB_SECONDS)} (the result says so). One long job a visitor at a time; another "
                "waits in line with its place shown.")
    with gr.Row(equal_height=True):
        runs = gr.Number(200, label="runs", info=f"10 to {MAX_AUDIT_RUNS}", elem_id="audit-runs", scale=0,
                         min_width=160)
        button = gr.Button("Run the sampling audit", elem_id="audit-run", scale=0, min_width=220)
    words = gr.Markdown(elem_id="sampling-audit")
    plot = gr.Plot(sampling_audit_figure(None), show_label=False, elem_id="audit-plot")
    return AuditSection(greedy, runs, button, words, plot)


def wire_audit(page: Page, section: AuditSection, concurrency_limit: int) -> None:
    """The sampling audit's event: the page's prompt, model, method, draft and sampling settings; a long job
    (``long_jobs``: its group's ``concurrency_limit``, one a visitor, priced in time and cut to the bound)."""

    def run_audit(values: dict, request: gr.Request, progress=gr.Progress()):
        try:
            options = decode_options(values[page.method], values[page.draft], values[page.gamma],
                                     values[page.controller], values[page.temperature], values[page.top_k],
                                     values[page.top_p], 1, values[page.seed])
            options |= page.options.keywords(options["method"], values) | {"dtype": precision(values[page.precision])}
            options["session"] = history_session(request)  # a suffix audit's runs join this visitor's outputs only
            runs = whole("runs", values[section.runs])
            temperature = options.pop("temperature") or AUDIT_TEMPERATURE
            del options["max_new_tokens"]  # the audit decodes two tokens a run
            hardware = values.get(page.hardware)
            bound_s = None  # a CPU audit's: it is cut to the runs that fit in it (a GPU call has its own bound)
            if zerogpu.use_gpu(hardware):  # the whole audit in one GPU call
                progress(0, desc=f"{runs} seeded runs on a ZeroGPU GPU")
                result = zerogpu.audit_run(values[page.model], values[page.prompt], runs, temperature, options)
            else:
                # what decides a run's pace: the model, the prompt and every setting but the seed
                key = ("audit", values[page.model], values[page.prompt], temperature,
                       *sorted((k, repr(v)) for k, v in options.items() if k not in ("seed", "session")))
                with LongJob(request, "the sampling audit", key, runs, tell=lambda line: progress(0, desc=line),
                             over="cut") as job:
                    progress(0, desc="seeded runs of the first tokens")
                    first_done = []

                    def told(done: int, total: int) -> None:
                        job.progress(done, total)
                        if not first_done:  # the first run builds what the method needs: the pace is the others'
                            first_done.append(time.monotonic())
                            progress(done / total, desc=f"run {done} of {total}")
                            return
                        left = (time.monotonic() - first_done[0]) / (done - 1) * (total - done)
                        progress(done / total, desc=f"run {done} of {total} · about {duration(left)} left")

                    result = sampling_audit(values[page.model], values[page.prompt], runs=runs, temperature=temperature,
                                            progress=told, should_stop=job.between, device=zerogpu.device_for(hardware),
                                            max_seconds=job.bound_s, seconds_per_run=job.ticket.per_unit, **options)
                    bound_s = job.bound_s
        except explorer.ExplorerError as err:
            raise gr.Error(html.escape(one_line(err))) from None
        except Exception:  # the stack trace goes to the log, never to the page
            log.exception("sampling audit failed")
            raise gr.Error("something went wrong on the server during the audit (it is logged)") from None
        words = sampling_audit_text(result, lossy=result.lossy)
        cut = result.cut_words(bound_s)
        words = f"{viz.safe_markdown(cut[0].upper() + cut[1:])}. {words}" if cut else words
        return {section.words: f"{viz.safe_markdown(options['method'])}: {words}", section.plot: sampling_audit_figure(result)}

    section.button.click(run_audit, inputs={*page.run_inputs(), section.runs}, outputs=[section.words, section.plot],
                         concurrency_limit=concurrency_limit, concurrency_id=LONG_GROUP, api_visibility="private")
