"""The Compare tab's race: the Watch tab's prompt and settings through plain decoding and up to three
systems, live (``explorer.race``), then its numbers as a benchmark report shown in Compare and offered
as a file."""

from __future__ import annotations

import html
import json
import logging
import shutil
import time
from dataclasses import dataclass

import gradio as gr

import explorer
from explorer.errors import one_line
from explorer import methods, race
from explorer.viz.race import RACE_CSS, race_html

from .trace_files import offered_name, race_folder
from .inputs import decode_options, precision
from .page import Page
from . import jobs, long_jobs, zerogpu
from .sections import CompareView
from .session import StopRequests, history_session, session_id

log = logging.getLogger(__name__)
RACE_STOPS = StopRequests()
SHOW_EVERY_S = 0.25  # the lanes are redrawn at most this often (drawing shares the CPU with the race)


@dataclass
class RaceSection:
    lanes: list[gr.Dropdown]
    run: gr.Button
    stop: gr.Button
    view: gr.HTML
    download: gr.DownloadButton


def race_section() -> RaceSection:
    """The race's components (call inside the Blocks context, where the race goes)."""
    gr.Markdown("### Race: plain decoding against up to three methods, live", elem_classes=["section-title"])
    gr.Markdown("The prompt, model and sampling settings of the Watch tab, decoded by plain decoding and by each "
                "system you pick. When it ends, its numbers appear in the Compare view below (and as a report file "
                "to download or upload again later).")
    with gr.Row():
        lanes = [gr.Dropdown(["none", *race.race_systems()], value=value, label=f"lane {i + 2}", allow_custom_value=True,
                             elem_id=f"race-lane-{i + 2}") for i, value in enumerate(race.DEFAULT_LANES)]
    with gr.Row():
        run = gr.Button("▶ Start the race", variant="primary", elem_id="race-run")
        stop = gr.Button("■ Stop the race", variant="stop", elem_id="race-stop")
        download = gr.DownloadButton("⬇ The race as a report (.json)", interactive=False, elem_id="race-download")
    view = gr.HTML(race_html([], 0), css_template=RACE_CSS, js_on_load=None, elem_id="race")
    return RaceSection(lanes, run, stop, view, download)


def wire_race(page: Page, section: RaceSection, compare: CompareView, concurrency_limit: int) -> None:
    """Start (queued with the decodes), Stop (not queued, so it gets through) and the race's outputs."""

    def run_race(values: dict, request: gr.Request):
        session = session_id(request)
        RACE_STOPS.begin(session)
        try:
            options = decode_options("ar", None, 4, None, values[page.temperature], values[page.top_k],
                                     values[page.top_p], values[page.max_new_tokens], values[page.seed])
            yield {section.view: "<div class='race'><div class='race-clock'>◷ Loading the models of every "
                                 "lane…</div></div>", section.download: gr.DownloadButton(interactive=False)}
            keywords = {"temperature": options["temperature"], "top_k": options["top_k"], "top_p": options["top_p"],
                        "max_new_tokens": options["max_new_tokens"], "seed": options["seed"],
                        "dtype": precision(values[page.precision]), "session": history_session(request)}
            systems = [values[d] for d in section.lanes]
            hardware = values.get(page.hardware)
            if zerogpu.use_gpu(hardware):  # the whole race in one GPU call, drawn when it ends
                yield {section.view: "<div class='race'><div class='race-clock'>◷ Racing on a ZeroGPU GPU (the whole "
                                     "race in one call; it is drawn when it ends)…</div></div>"}
                result = zerogpu.race_run(values[page.model], values[page.prompt], systems, keywords,
                                          methods.export_sessions(keywords["session"]))
                methods.replace_sessions(keywords["session"], result["sessions"])  # what the lanes' methods kept, as on a CPU
                shown = compare.show(result["report"])
                yield {section.view: race_html(result["lanes"], options["max_new_tokens"]),
                       section.download: gr.DownloadButton(value=str(_write_report(shown[compare.report], session)),
                                                           interactive=True), **shown}
                return
            lanes = race.start(values[page.model], values[page.prompt], systems, device=zerogpu.device_for(hardware),
                               **keywords)
            shown = 0.0
            for _ in race.steps(lanes):
                if RACE_STOPS.pending(session) or jobs.stopped(session):
                    break
                if time.perf_counter() - shown >= SHOW_EVERY_S:
                    shown = time.perf_counter()
                    views = race.snapshot(lanes)  # its tokens price the race as it goes (long_jobs)
                    long_jobs.progress(session, sum(len(v.tokens) for v in views), len(lanes) * options["max_new_tokens"])
                    yield {section.view: race_html(views, options["max_new_tokens"])}
            shown = compare.show(race.race_report(lanes))
            yield {section.view: race_html(race.snapshot(lanes), options["max_new_tokens"]),
                   section.download: gr.DownloadButton(value=str(_write_report(shown[compare.report], session)),
                                                       interactive=True), **shown}
        except explorer.ExplorerError as err:
            raise gr.Error(html.escape(one_line(err))) from None
        except Exception:  # the stack trace goes to the log, never to the page
            log.exception("race failed")
            raise gr.Error("something went wrong on the server during the race (it is logged)") from None
        finally:
            RACE_STOPS.end(session)

    def stop_race(request: gr.Request):
        if not RACE_STOPS.request(session_id(request)):
            gr.Info("No race is running.")

    section.run.click(long_jobs.long_gated(run_race, "the race", RACE_STOPS.request), inputs={page.model, page.precision, page.hardware, page.prompt, page.temperature, page.top_k, page.top_p,
                                        page.max_new_tokens, page.seed, *section.lanes},
                      outputs=[section.view, section.download, *compare.outputs()],
                      concurrency_limit=concurrency_limit, concurrency_id=long_jobs.LONG_GROUP, show_progress="hidden",
                      api_visibility="private")
    section.stop.click(stop_race, queue=False, show_progress="hidden", api_visibility="private")


def _write_report(report: dict, session: str):
    folder = race_folder(session)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / offered_name("race", session)
    path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return path
