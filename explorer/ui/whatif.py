"""The Understand tab's "What if": paste or upload a serving engine's speculative-decoding numbers (a vLLM
/metrics page, vLLM or SGLang log lines, llama.cpp timings), price a draft token and a verification, and
see acceptance by draft position and the best γ, beside this session's runs and the shipped benchmark's
drafts on one chart (``explorer.whatif`` reads and analyses; ``viz.whatif`` draws)."""

from __future__ import annotations

import html
import logging
from dataclasses import dataclass

import gradio as gr

from explorer import whatif
from explorer.errors import ExplorerError, one_line
from explorer.limits import clip
from explorer.reports import load_bench_report
from explorer.viz import safe_markdown
from explorer.viz.whatif import whatif_figure

from . import zerogpu
from .long_jobs import LONG_GROUP, LongJob
from .sections import LATEST_BENCH
from .session import RUNS, session_id

log = logging.getLogger(__name__)

EXAMPLE = LATEST_BENCH.parent / "whatif" / "vllm-metrics-example.txt"
INTRO = (
    "Serving engines count how many drafts they made and how many drafted tokens the target accepted at "
    "each position, but not what that means for the draft length. Paste what yours exports: a vLLM "
    "`/metrics` page (the `vllm:spec_decode_…` counters), vLLM's \"SpecDecoding metrics:\" log line, "
    "SGLang's `sglang:spec_accept_length` or \"accept len:\" log, or llama.cpp's `timings` JSON. The left "
    "panel shows the share of drafts whose position *i* was accepted; the right one the speed-up at each "
    "draft length γ: tokens per target forward, 1 + a₁ + … + a_γ, over the forward's price, γ·c + T(γ+1)/T(1) "
    "(Leviathan et al.'s Theorem 3.8 with the verification priced). Dotted: one i.i.d. acceptance rate α with "
    "the same mean, what a single \"acceptance rate\" implies.")
WARNING_END = "\n\n---\n\n"  # after a refusal's line, the previous analysis' words
NOTHING = "Paste an engine's metrics, upload a file or load the example, then press **Analyse**."


@dataclass
class WhatIfSection:
    text: gr.Textbox
    plot: gr.Plot
    words: gr.Markdown


def whatif_section(concurrency_limit: int) -> WhatIfSection:
    """The section's components and events (call inside the Blocks context)."""
    gr.Markdown("### What if: your engine's numbers, and the best γ", elem_classes=["section-title"])
    gr.Markdown(INTRO)
    uploaded = gr.State(None)
    text = gr.Textbox(label="Metrics, log lines or timings JSON", lines=5, max_lines=12, elem_id="whatif-text",
                      placeholder='vllm:spec_decode_num_drafts_total{model_name="…"} 1000.0\n…')
    with gr.Row(equal_height=True):
        upload = gr.UploadButton("⬆ Upload a metrics file", file_types=[".txt", ".log", ".prom", ".json"],
                                 type="binary", elem_id="whatif-upload", scale=0, min_width=220)
        example = gr.Button("Load an example (vLLM /metrics)", elem_id="whatif-example", scale=0, min_width=240)
    with gr.Row():
        # text boxes, not numbers: a blank number box arrives as 0, and here blank means "not given"
        cost = gr.Textbox("", label="c: a draft token's time ÷ a target forward's",
                         info=f"blank: a run's own measured c, else {whatif.DEFAULT_DRAFT_COST}; 0 for n-gram drafts",
                         elem_id="whatif-cost")
        verify = gr.Textbox("", label="T(n)/T(1), n = 1, 2, …", elem_id="whatif-verify",
                            info="blank: flat (a GPU with room to spare); or 1,1.05,1.1…; or 'measure' (this machine)")
        gamma = gr.Textbox("", label="draft length, if the file has no positions", elem_id="whatif-gamma",
                          info="llama.cpp --draft-max, SGLang --speculative-num-steps")
    with gr.Row():
        mine = gr.Checkbox(False, label="add this session's runs", elem_id="whatif-mine")
        shipped = gr.Checkbox(False, label="add the shipped benchmark's drafts (CPU)", elem_id="whatif-shipped")
    run = gr.Button("Analyse", variant="primary", elem_id="whatif-run")
    plot = gr.Plot(whatif_figure([]), show_label=False, elem_id="whatif-plot")
    words = gr.Markdown(NOTHING, elem_id="whatif-words")

    def analyse(pasted, upload_bytes, c, curve_text, gamma_value, with_mine, with_shipped, shown, request: gr.Request,
                progress=gr.Progress()):
        return analyse_inputs(pasted, upload_bytes, c, curve_text, gamma_value, with_mine, with_shipped, shown, request,
                              lambda line: progress(0.5, desc=line))

    def load_upload(data):
        # the file stays on the server; the box is emptied so that Analyse reads the file
        size = len(data or b"")
        if size > whatif.MAX_METRICS_BYTES:
            gr.Warning(html.escape(f"the file has {size / 2**20:.1f} MB; at most "
                                   f"{whatif.MAX_METRICS_BYTES // 2**20} MB are read"))
            return None, gr.Textbox()
        return data, gr.Textbox(value="", placeholder=f"(an uploaded file of {size / 1024:.1f} KB: press Analyse; "
                                                      "type here to analyse pasted text instead)")

    inputs = [text, uploaded, cost, verify, gamma, mine, shipped, words]
    run.click(analyse, inputs=inputs, outputs=[plot, words], concurrency_limit=concurrency_limit,
              concurrency_id=LONG_GROUP, show_progress="minimal", api_visibility="private")
    upload.upload(load_upload, inputs=[upload], outputs=[uploaded, text], api_visibility="private").then(
        analyse, inputs=inputs, outputs=[plot, words], concurrency_limit=concurrency_limit, concurrency_id=LONG_GROUP,
        api_visibility="private")
    example.click(lambda: (EXAMPLE.read_text(encoding="utf-8"), None), outputs=[text, uploaded],
                  api_visibility="private").then(analyse, inputs=inputs, outputs=[plot, words],
                                                 concurrency_limit=concurrency_limit, concurrency_id=LONG_GROUP,
                                                 api_visibility="private")
    return WhatIfSection(text, plot, words)


def analyse_inputs(pasted, upload_bytes, c, curve_text, gamma_value, with_mine, with_shipped, shown, request,
                   progress=None) -> tuple:
    """Analyse's (chart, words): the inputs read and analysed, or a refusal in one line above the words shown
    before (the chart stays). Anything else that fails is logged and said in one line too: the page never shows
    a bare "Error"."""
    try:
        drafters = _drafters(pasted, upload_bytes, gamma_value, with_mine, with_shipped, request)
        c = whatif.check_draft_cost(_blank_or(c, float, "the draft cost c"))
        measured_on = None
        measure = str(curve_text or "").strip().lower() == "measure"
        if measure and zerogpu.ON_ZERO_GPU:
            curve, measured_on = zerogpu.verify_cost_run(max(d.positions for d in drafters))
        elif measure:
            positions = max(d.positions for d in drafters)
            # ≈ 6 × (K + 1) target forwards: a long job, priced from the pace of earlier measurements of its size
            with LongJob(request, "measuring T(n)", ("verify cost", positions), 1, "measurement",
                         hint="give T(n)/T(1) as numbers instead", tell=progress or (lambda line: None)) as job:
                curve, measured_on = whatif.measure_verify_cost("default", positions, progress=progress)
                job.progress(1)
        else:
            curve = whatif.parse_verify_cost(curve_text)
        results = whatif.analyse_all(drafters, c, curve)["drafters"]
    except ExplorerError as err:
        return gr.update(), _refused(one_line(err), shown)
    except Exception:
        log.exception("what-if analysis failed")
        return gr.update(), _refused("something went wrong on the server while analysing these numbers (it is logged)",
                                     shown)
    return whatif_figure(results), _words(results, measured_on)


def _refused(line: str, shown) -> str:
    """The one-line reason, then what was analysed before (its words; the chart stays as it is)."""
    before = str(shown or "").split(WARNING_END, 1)[-1] if str(shown or "").startswith("⚠️") else shown
    return f"⚠️ {safe_markdown(line)}{WARNING_END}{before or ''}"


def _drafters(pasted, upload_bytes, gamma_value, with_mine: bool, with_shipped: bool, request) -> list:
    """Every drafter to analyse: the pasted text (or else the uploaded file), this session's runs and
    the shipped benchmark's drafts when asked."""
    gamma = _blank_or(gamma_value, int, "the draft length")
    drafters = []
    source = pasted if str(pasted or "").strip() else upload_bytes
    if source:
        drafters += whatif.read(source, gamma=gamma)
    if with_mine:
        for k, trace in enumerate(RUNS.of(session_id(request)), 1):
            if any(r.drafted for r in trace.rounds):
                drafters.append(whatif.from_trace(trace, name=f"your run {k}: {trace.method}"
                                                  + (f" {trace.draft}" if trace.draft else "")))
    if with_shipped and LATEST_BENCH.is_file():
        drafters += whatif.from_report(load_bench_report(LATEST_BENCH.read_text()))
    if not drafters:
        raise ExplorerError("nothing to analyse: paste an engine's metrics, upload a file, load the example"
                            + (" (this session has no run that drafted yet)" if with_mine else ""))
    return drafters[: whatif.MAX_DRAFTERS]


def _blank_or(value, kind, what: str):
    """A typed number, or None for a blank box."""
    typed = str(value if value is not None else "").strip()
    if not typed:
        return None
    try:
        return kind(typed[:40])
    except ValueError:
        words = "a whole number" if kind is int else "a number"
        raise ExplorerError(f"{what} must be {words} (or blank), got {clip(typed, 40)}") from None


def _words(results: list[dict], measured_on: str | None) -> str:
    """Each drafter's plain words, its name in bold (escaped: names come from the file's labels)."""
    blocks = []
    for r in results:
        body = safe_markdown(whatif.explain(r)).replace("\n", "  \n")
        blocks.append(f"**{safe_markdown(r['name'])}**  \n{body}")
    if measured_on:
        blocks.append(f"T(n)/T(1) measured with {safe_markdown(measured_on)}.")
    return "\n\n".join(blocks)
