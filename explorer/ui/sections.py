"""Self-contained sections of the page, each building its own components and wiring its own events:

- ``compare_section`` — the benchmark's Compare view: a benchmark that ships (``assets/bench-*.json``, made by
  ``python -m explorer bench``; it opens on ``bench-latest.json``, today's methods), or a report the user uploads;
- ``bild_sweep_section`` — BiLD's quality/cost trade-off over a grid of α_FB × α_RB, run on demand with a
  progress bar (the BiLD paper's Figure 9 on this model): the sweep BiLD's record declares, run by
  ``explorer.sweep.run``;
- ``theory_lab_section`` — the theory lab: a synthetic draft with a dialled α and c over γ, measured against
  Theorem 3.8 as written and priced with this machine's T(γ+1)/T(1), run on demand with a progress bar.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass

import gradio as gr

from explorer import bench, sweep
from explorer.errors import ExplorerError, one_line
from explorer.reports import LATEST, benchmark_label, load_bench_report
from explorer.shipped import ASSETS
from explorer.ui import zerogpu
from explorer.ui.long_jobs import LONG_GROUP, LongJob
from explorer.viz import empty_figure, safe_markdown
from explorer.viz.compare import compare_figure
from explorer.viz.lab import theory_lab_figure
from explorer.viz.views.bild import sweep_figure

LATEST_BENCH = ASSETS / LATEST


def shipped_benchmarks() -> dict[str, dict]:
    """Every benchmark that ships, checked like an upload, by file name: the latest first, then by name."""
    files = sorted(ASSETS.glob("bench-*.json"), key=lambda f: (f.name != LATEST, f.name))
    return {f.name: load_bench_report(f.read_text(encoding="utf-8")) for f in files}
AGAINST = {"our ar": "ar", "HF generate": "hf"}


def _compare_outputs(report: dict | None, against: str):
    if not report:
        return (empty_figure("Speed-up over our ar: measured vs predicted",
                             "No benchmark report yet: run `python -m explorer bench` or upload one."), "")
    # A report may be a stranger's: its strings render as typed text, never as markup.
    return compare_figure(report, AGAINST[against]), bench.markdown(report, text=safe_markdown)


@dataclass
class CompareView:
    """What other sections may write to: the report shown and its two outputs (the race sends its own)."""

    report: gr.State
    against: gr.Radio
    plot: gr.Plot
    table: gr.Markdown
    shipped: gr.Dropdown  # which shipped benchmark is shown: none while another report is

    def outputs(self) -> list:
        return [self.report, self.against, self.plot, self.table, self.shipped]

    def show(self, report: dict) -> dict:
        """Updates that put ``report`` (a race's, your runs') in the Compare view, over our ar; it passes
        the same checks as an uploaded report first."""
        report = load_bench_report(json.dumps(report))
        figure, table = _compare_outputs(report, "our ar")
        return {self.report: report, self.against: "our ar", self.plot: figure, self.table: table, self.shipped: None}


def compare_section() -> CompareView:
    """The Compare view (call inside the Blocks context)."""
    benchmarks = shipped_benchmarks()
    shipped = next(iter(benchmarks.values()), None)
    gr.Markdown("### Compare: every method side by side", elem_classes=["section-title"])
    gr.Markdown("Measured in one process, interleaved, medians over repeats — a run of `python -m explorer bench` "
                "that ships with the app (the first is today's methods; the others each measured one question), or a "
                "report you upload. Bars: the measured speed-up, Leviathan et al.'s Theorem 3.8 from the measured α "
                "and c, and the same theorem with the verification priced as measured, T(γ+1)/T(1). A speed-up "
                "measured while the machine's pace moved, or larger than a lossless method's tokens per target "
                "forward allow, is withheld and the table says why.")
    report_state = gr.State(shipped)
    with gr.Row():
        chosen = gr.Dropdown([(benchmark_label(name, report), name) for name, report in benchmarks.items()],
                             value=next(iter(benchmarks), None), label="Shipped benchmark", elem_id="compare-shipped")
        against = gr.Radio(list(AGAINST), value="our ar", label="Speed-up over", elem_id="compare-against")
        upload = gr.UploadButton("⬆ Upload a benchmark report (.json)", file_types=[".json"], type="binary",
                                 elem_id="compare-upload")
    figure, table = _compare_outputs(shipped, "our ar")
    plot = gr.Plot(figure, show_label=False, elem_id="compare-plot")
    markdown = gr.Markdown(table, elem_id="compare-table", elem_classes=["figure-table"])

    def redraw(report, against_label):
        return _compare_outputs(report, against_label)

    def pick(name, against_label):
        report = benchmarks.get(name)  # only a file that ships: the menu's value comes from the browser
        return report, *_compare_outputs(report, against_label)

    def uploaded(data, report, against_label, name):
        try:
            report, name = load_bench_report(data), None  # the menu names no shipped file while an upload shows
        except ExplorerError as err:
            gr.Warning(html.escape(one_line(err)))  # toasts render HTML; the message may quote the upload
        return report, *_compare_outputs(report, against_label), name

    against.change(redraw, inputs=[report_state, against], outputs=[plot, markdown], api_visibility="private")
    chosen.input(pick, inputs=[chosen, against], outputs=[report_state, plot, markdown], api_visibility="private")
    upload.upload(uploaded, inputs=[upload, report_state, against, chosen],
                  outputs=[report_state, plot, markdown, chosen], api_visibility="private")
    return CompareView(report_state, against, plot, markdown, chosen)


def parse_numbers(text: str, name: str) -> tuple[float, ...]:
    """Comma-separated numbers from a text box (at most a few dozen characters are read as numbers)."""
    try:
        return tuple(float(x) for x in str(text)[:200].split(",") if x.strip())
    except ValueError:
        raise ExplorerError(f"{name}: write comma-separated numbers, e.g. 0.2, 0.5, 0.8") from None


def parse_thresholds(text: str, name: str, allow_inf: bool) -> tuple[float, ...]:
    """Comma-separated thresholds from a text box; a readable error for anything else."""
    values = parse_numbers(text, name)
    if not values or len(values) > 8:
        raise ExplorerError(f"{name}: give between 1 and 8 values")
    if any(math.isnan(v) or (math.isinf(v) and not allow_inf) for v in values):
        raise ExplorerError(f"{name}: {'only α_RB may be inf' if not allow_inf else 'no NaN'}")
    return values


def bild_sweep_section(concurrency_limit: int) -> None:
    """BiLD's threshold sweep (call inside the Blocks context)."""
    gr.Markdown("### BiLD: quality against cost over α_FB × α_RB", elem_classes=["section-title"])
    gr.Markdown("Each point decodes the shipped prompts with `bild` and compares the text with the large model's "
                "own greedy output (token agreement, ROUGE-L) against the large model's forwards per token. "
                "One curve per α_RB; marker size grows with α_FB; the Pareto front is dotted. BiLD is lossy.")
    with gr.Row():
        draft = gr.Textbox("early-exit:8", label="small model", elem_id="sweep-draft")
        fallbacks = gr.Textbox("0.2, 0.5, 0.8", label="α_FB values", elem_id="sweep-fallbacks")
        rollbacks = gr.Textbox("1, 3, inf", label="α_RB values (inf: no rollback)", elem_id="sweep-rollbacks")
        prompts = gr.Slider(1, len(bench.load_prompts()), value=2, step=1, label="prompts", elem_id="sweep-prompts")
        tokens = gr.Slider(8, 96, value=24, step=8, label="new tokens", elem_id="sweep-tokens")
    run = gr.Button("Run the sweep", elem_id="sweep-run")
    plot = gr.Plot(empty_figure("BiLD trade-off: quality against cost", "Run the sweep to draw it."),
                   show_label=False, elem_id="bild-sweep-plot")
    table = gr.Markdown(elem_id="bild-sweep-table", elem_classes=["figure-table"])

    def run_sweep(draft_spec, fb_text, rb_text, n_prompts, n_tokens, request: gr.Request, progress=gr.Progress()):
        try:
            fbs = parse_thresholds(fb_text, "α_FB", allow_inf=False)
            rbs = parse_thresholds(rb_text, "α_RB", allow_inf=True)
            texts = [p["text"] for p in bench.load_prompts()[: int(n_prompts)]]
            if zerogpu.ON_ZERO_GPU:  # the whole sweep in one GPU call
                progress(0, desc="the sweep on a ZeroGPU GPU")
                report = zerogpu.sweep_run(str(draft_spec).strip(), fbs, rbs, int(n_tokens), texts)
            else:
                key = ("bild sweep", str(draft_spec).strip(), int(n_tokens), len(texts))
                with LongJob(request, "the sweep", key, len(fbs) * len(rbs), "point", hint="fewer values or tokens",
                             tell=lambda line: progress(0, desc=line)) as job:
                    progress(0, desc="large model's own outputs (the reference)")
                    report = sweep.run("bild", "default", str(draft_spec).strip(), {"fallbacks": fbs, "rollbacks": rbs},
                                       max_new_tokens=int(n_tokens), prompts=texts, progress=job.told(progress),
                                       should_stop=job.between)
        except ExplorerError as err:
            raise gr.Error(html.escape(one_line(err))) from None  # toasts render HTML; the message may quote input
        return sweep_figure(report), sweep.table("bild", report)

    run.click(run_sweep, inputs=[draft, fallbacks, rollbacks, prompts, tokens], outputs=[plot, table],
              concurrency_limit=concurrency_limit, concurrency_id=LONG_GROUP, api_visibility="private")


def theory_lab_section(concurrency_limit: int) -> None:
    """The theory lab (call inside the Blocks context)."""
    gr.Markdown("### Theory lab: when does Theorem 3.8 hold here?", elem_classes=["section-title"])
    gr.Markdown("A synthetic draft proposes the target's own next token with probability **α** (else another) and "
                "costs **c** × one target step per token, so the theorem's assumptions hold by construction. Each "
                "point decodes the first shipped prompt on the default model (greedy, fixed γ) and measures tokens per round and the speed-up over "
                "plain decoding. Dotted: the theorem as written, where checking γ + 1 tokens costs one target step. "
                "Solid: the same theorem with that check priced as measured on this machine, T(γ+1)/T(1). Where the "
                "dots leave the dotted line, the paper's verify-cost assumption is what breaks; where they leave the "
                "solid one too, the run's per-round overheads and the few dozen tests behind α̂ do. "
                "Method `synthetic` in the Watch tab's method picker runs one point round by round.")
    with gr.Row():
        alphas = gr.Textbox("0.6, 0.9", label="α values (0–1)", elem_id="lab-alphas")
        gammas = gr.Textbox("1, 2, 4, 8", label="γ values (whole)", elem_id="lab-gammas")
        costs = gr.Textbox("0, 0.2", label="c values (× one target step, 0–2)", elem_id="lab-costs")
        tokens = gr.Slider(8, 96, value=32, step=8, label="new tokens per run", elem_id="lab-tokens")
    run = gr.Button("Run the lab", elem_id="lab-run")
    plot = gr.Plot(empty_figure("Theory lab: measured against Theorem 3.8", "Run the lab to draw it."),
                   show_label=False, elem_id="lab-plot")
    table = gr.Markdown(elem_id="lab-table", elem_classes=["figure-table"])

    def run_lab(alpha_text, gamma_text, cost_text, n_tokens, request: gr.Request, progress=gr.Progress()):
        try:
            grid = sweep.lab_grid(parse_numbers(alpha_text, "α"), parse_numbers(gamma_text, "γ"),
                                  parse_numbers(cost_text, "c"))
            prompts = [bench.load_prompts()[0]["text"]]
            if zerogpu.ON_ZERO_GPU:  # the whole lab in one GPU call
                progress(0, desc="the lab on a ZeroGPU GPU")
                report = zerogpu.lab_run(*grid, int(n_tokens), prompts)
            else:
                key = ("theory lab", int(n_tokens))
                with LongJob(request, "the lab", key, len(grid[0]) * len(grid[1]) * len(grid[2]), "point",
                             hint="fewer values or tokens", tell=lambda line: progress(0, desc=line)) as job:
                    progress(0, desc="the target's own output and its T(n), measured")
                    report = sweep.theory_sweep("default", *grid, int(n_tokens), prompts=prompts,
                                                progress=job.told(progress), should_stop=job.between)
        except ExplorerError as err:
            raise gr.Error(html.escape(one_line(err))) from None
        return theory_lab_figure(report), sweep.theory_markdown(report)

    run.click(run_lab, inputs=[alphas, gammas, costs, tokens], outputs=[plot, table],
              concurrency_limit=concurrency_limit, concurrency_id=LONG_GROUP, api_visibility="private")
