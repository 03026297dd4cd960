"""``python -m explorer soak --adversarial``: the probe of issue 28 as a repeatable run, on loopback, in this
process (the app served as ``python app.py`` serves it: ``explorer.ui.serving_demo()``).

An operator's tool (``explorer.tools``), like the soak test it builds on; the app never imports it.

1. **Cancels**: long decodes through the public ``/decode`` API (beam search at width 8, a long speculative
   decode, a long plain one) cancelled while they compute; for each, the seconds until this process is idle
   again (under 10 % of one core over a quarter second) and the most jobs that computed at once
   (``ui.jobs.WORK``) against the configured concurrency.
2. **Uploads at the limit**: ``UPLOADS`` files of the upload cap posted to Gradio's ``/gradio_api/upload``
   (more than the disk budget together), then the upload folder's bytes once the trimmer has run.
3. **Worst-case legal traces**: a Thompson-sampling trace of ``MAX_TRACE_ROUNDS`` rounds with a θ per draft
   step, a BiTA round with a 1 000-input tree and a lookahead round at its largest options: bytes, seconds to
   read and check, and seconds to draw a step of the heaviest view (server side); and a lookahead round of
   1 024 nodes (more than its options can produce), which must be refused in one line.
4. **Issue 40's probes**: What if's worst log line for the old vLLM pattern (2 000 spaces then ``x``: 10 s
   before) and 4 MB of it, in CPU seconds; two MCP connections asking ``decode`` (``suffix``) to continue the
   same sentence, the second of which must draft nothing from the first's output nor see it in ``matched``
   (with, as a control, one API client asking twice, which drafts from its own first output).
5. Issue 51's probe (``soak_long_jobs``): two tabs of one visitor each start the page's sampling audit with
   `quantized` and 2 000 runs while another client asks for one token every 2 s; each must answer within 5 s.
6. Resident memory and the upload folder's bytes before and after.

Bounded by construction (a handful of jobs and uploads) and loopback only, like the soak test.
"""

from __future__ import annotations

import time

from . import soak, soak_long_jobs
from .forged_traces import oversized_trace_texts, worst_trace_texts
from .soak_clients import page_client
from .soak_server import rounded, rss_mb, served, set_offline_env
from ..limits import MAX_TRACE_BYTES, MAX_UPLOAD_BYTES

IDLE_SHARE = 0.10  # of one core: "idle" below this
IDLE_WINDOW_S = 0.25
IDLE_WAIT_S = 20.0
UPLOADS = MAX_UPLOAD_BYTES // MAX_TRACE_BYTES + 4  # past the disk budget together
PASSES = 2
CANCELS = (("beam", "model:tiny-random:2:16", 8, 120), ("speculative", "model:tiny-random:2:16", 4, 1000),
           ("ar", None, 4, 1000))


def idle_after(start: float) -> float | None:
    """Seconds from ``start`` until this process spends under ``IDLE_SHARE`` of a core over a window."""
    while time.perf_counter() - start < IDLE_WAIT_S:
        cpu = time.process_time()
        time.sleep(IDLE_WINDOW_S)
        if time.process_time() - cpu < IDLE_SHARE * IDLE_WINDOW_S:
            return round(time.perf_counter() - start, 2)
    return None


def cancels(url: str, model: str, progress) -> list[dict]:
    from ..ui import jobs

    client = page_client(url, download_files=False)
    rows = []
    for method, draft, width_or_gamma, tokens in CANCELS:
        jobs.WORK.most = jobs.WORK.busy
        job = client.submit("abc", method, draft, width_or_gamma, 0.0, tokens, 0, model,
                            api_name="/decode")
        deadline = time.perf_counter() + 60
        while jobs.WORK.busy == 0 and time.perf_counter() < deadline and not job.done():
            time.sleep(0.05)
        time.sleep(1.0)
        running = not job.done()
        start = time.perf_counter()
        job.cancel()
        idle = idle_after(start)
        rows.append({"method": method, "running_when_cancelled": running, "idle_after_s": idle,
                     "most_computing": jobs.WORK.most, "slots": jobs.WORK.slots})
        progress(f"cancelled {method} while {'running' if running else 'done'}: idle after {idle} s, "
                 f"at most {jobs.WORK.most} of {jobs.WORK.slots} slots computing")
    return rows


def uploads(url: str, progress) -> dict:
    import httpx

    from ..ui import disk

    folder = disk.gradio_folder()
    before = _folder_bytes(folder)
    payload = b"{" + b" " * (MAX_TRACE_BYTES - 2) + b"}"
    started = time.perf_counter()
    accepted = 0
    with httpx.Client(timeout=60) as http:
        for k in range(UPLOADS):
            response = http.post(f"{url}gradio_api/upload", files={"files": (f"limit-{k}.json", payload)})
            accepted += response.status_code == 200
    posted_s = time.perf_counter() - started
    peak = _folder_bytes(folder)
    time.sleep(2 * disk.EVERY_S + 1)
    after = _folder_bytes(folder)
    progress(f"{accepted} of {UPLOADS} uploads of {MAX_TRACE_BYTES >> 20} MB in {posted_s:.1f} s; upload folder "
             f"{peak >> 20} MB, then {after >> 20} MB after the trimmer (budget {MAX_UPLOAD_BYTES >> 20} MB)")
    return {"uploads": UPLOADS, "accepted": accepted, "each_mb": MAX_TRACE_BYTES >> 20, "seconds": round(posted_s, 1),
            "folder_mb_before": round(before / 2**20, 1), "folder_mb_peak": round(peak / 2**20, 1),
            "folder_mb_after_trim": round(after / 2**20, 1), "budget_mb": MAX_UPLOAD_BYTES >> 20}


def _folder_bytes(folder) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def worst_traces(progress) -> list[dict]:
    """The worst legal traces read and checked, then one step of the heaviest view (server side)."""
    from ..viz.views.lookahead import mask_figure
    from ..viz.views.tree import tree_html
    from ..viz.views.ts import posterior_figure

    views = (posterior_figure, tree_html, mask_figure)
    rows = [_timed(name, text, view) for (name, text), view in zip(worst_trace_texts(), views, strict=True)]
    for row in rows:
        progress(f"{row['trace']}: {row['mb']} MB, read + check {row['read_s']} s, a step of its view "
                 f"{row['step_s']} s ({row['view_mb']} MB)")
    return rows


def refused_traces(progress) -> list[dict]:
    """The traces past what their method can write: each must be refused in one line, quickly."""
    import explorer

    rows = []
    for name, text in oversized_trace_texts():
        start = time.perf_counter()
        try:
            explorer.load_trace(text)
            answer = None
        except explorer.ExplorerError as err:
            answer = str(err)
        rows.append({"trace": name, "mb": round(len(text) / 2**20, 1), "seconds": round(time.perf_counter() - start, 2),
                     "refused": answer})
        progress(f"{name}: {rows[-1]['mb']} MB, " + (f"refused in {rows[-1]['seconds']} s: {answer}" if answer else
                                                     "ACCEPTED"))
    return rows


REDOS_HEAD = ("SpecDecoding metrics: Mean acceptance length: 2.00, Accepted: 10 tokens, Drafted: 40 tokens, "
              "Per-position acceptance rate:")


def redos(progress) -> list[dict]:
    """What if's reader on the inputs that made the old vLLM log pattern backtrack: CPU seconds and its answer."""
    from .. import whatif
    from ..errors import ExplorerError

    inputs = (("2 000 spaces then x (10 s before issue 40)", REDOS_HEAD + " " * 2000 + "x"),
              ("4 MB of spaces then x", REDOS_HEAD + " " * (whatif.MAX_METRICS_BYTES - len(REDOS_HEAD) - 1) + "x"))
    rows = []
    for name, text in inputs:
        start = time.process_time()
        try:
            whatif.read(text)
            answer = "read"
        except ExplorerError as err:
            answer = str(err)
        rows.append({"input": name, "cpu_s": round(time.process_time() - start, 4), "answer": answer})
        progress(f"What if, {name}: {rows[-1]['cpu_s']} CPU s: {answer}")
    return rows


PRIVATE = "patient zed was admitted on monday."  # what the first caller asks to repeat (tiny-random's alphabet)


def mcp_decode(url: str, prompt: str, model: str, max_new_tokens: int = 24):
    """One MCP connection of its own (as a separate assistant opens one) calling ``decode`` with ``suffix``."""
    import asyncio

    import explorer
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async def call():
        async with streamablehttp_client(url + "gradio_api/mcp/") as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                result = await session.call_tool(tools.tools[0].name, {
                    "prompt": prompt, "method": "suffix", "draft": "", "max_new_tokens": max_new_tokens,
                    "model": model})
                return [c.text for c in result.content if getattr(c, "text", None)]

    return explorer.load_trace(asyncio.run(call())[-1])


def mcp_privacy(url: str, model: str, progress) -> dict:
    """Two MCP connections continue the same sentence with ``suffix``: the second's rounds drafted from the
    history corpus, and its ``matched`` runs that are part of the first's output (both must be 0); the control,
    one API client asking twice, must draft from its own first output."""
    import importlib.util

    import explorer

    if importlib.util.find_spec("mcp") is None:
        progress("MCP privacy: skipped (the mcp package, gradio[mcp], is not installed)")
        return {"skipped": "the mcp package is not installed"}
    first, second = mcp_decode(url, PRIVATE, model), mcp_decode(url, PRIVATE, model)
    answer = list(first.output_ids)
    leaked = sum(1 for r in second.rounds if len(r.detail.get("matched", ())) > 4 and any(
        answer[i:i + len(r.detail["matched"])] == list(r.detail["matched"]) for i in range(len(answer)))
        and r.detail.get("source") == "history")
    client = page_client(url, download_files=False)
    runs = [explorer.load_trace(client.predict(PRIVATE, "suffix", "", 4, 0.0, 24, 0, model, api_name="/decode"))
            for _ in range(2)]
    row = {"same_output": first.output_ids == second.output_ids,
           "second_caller_history_rounds": sum(r.detail.get("source") == "history" for r in second.rounds),
           "second_caller_rounds_showing_the_firsts_text": leaked,
           "control_api_client_history_rounds": sum(r.detail.get("source") == "history" for r in runs[1].rounds)}
    progress(f"MCP privacy: the second MCP caller drafted {row['second_caller_history_rounds']} rounds from history "
             f"({leaked} showing the first's text); control, one API client twice: "
             f"{row['control_api_client_history_rounds']} rounds from its own history")
    return row


def _timed(name: str, text: str, view) -> dict:
    import explorer

    start = time.perf_counter()
    trace = explorer.load_trace(text)
    read = time.perf_counter() - start
    index = next((i for i, r in enumerate(trace.rounds) if r.tree and len(r.tree["nodes"]) > 100), 0)
    start = time.perf_counter()
    drawn = view(trace, index)
    sent = drawn if isinstance(drawn, str) else drawn.to_json()
    step = time.perf_counter() - start
    return {"trace": name, "mb": round(len(text) / 2**20, 1), "read_s": round(read, 2), "step_s": round(step, 2),
            "view_mb": round(len(sent) / 2**20, 2)}


def run(model: str = "tiny-random:1", host: str = "127.0.0.1", progress=None) -> dict:
    from ..ui import disk

    import gc

    progress = progress or (lambda line: None)
    host = soak.check_host(host)
    set_offline_env()
    started = time.perf_counter()
    with served(host) as (demo, url):
        # warm: the models loaded and every kind of job run once, so what follows measures growth, not start-up
        warm = page_client(url, download_files=False)
        for method, draft, width_or_gamma, _ in CANCELS:
            warm.predict("abc", method, draft, width_or_gamma, 0.0, 8, 0, model, api_name="/decode")
        gc.collect()
        rss, disk_before = [rounded(rss_mb())], _folder_bytes(disk.gradio_folder())
        for _ in range(PASSES):  # twice: memory that a pass leaves must not grow again with the next
            cancelled = cancels(url, model, progress)
            uploaded = uploads(url, progress)
            gc.collect()
            rss.append(rounded(rss_mb()))
        disk_after = _folder_bytes(disk.gradio_folder())
        private = mcp_privacy(url, model, progress)
        long_jobs = soak_long_jobs.two_tab_audit(demo, url, model, progress)
    worst = worst_traces(progress)
    return {
        "cancels": cancelled, "uploads": uploaded, "worst_traces": worst, "refused_traces": refused_traces(progress),
        "redos": redos(progress), "mcp_privacy": private, "two_tab_audit": long_jobs,
        "rss_mb_after_each_pass": rss,
        "upload_folder_mb_before": round(disk_before / 2**20, 1), "upload_folder_mb_after": round(disk_after / 2**20, 1),
        "wall_s": round(time.perf_counter() - started, 1), "model": model,
    }


def summary(report: dict) -> str:
    lines = [f"adversarial soak ({report['model']}, {report['wall_s']} s):"]
    for row in report["cancels"]:
        lines.append(f"  cancel {row['method']}: idle after {row['idle_after_s']} s; at most {row['most_computing']} of "
                     f"{row['slots']} slots computing")
    u = report["uploads"]
    lines.append(f"  {u['accepted']}/{u['uploads']} uploads of {u['each_mb']} MB: folder {u['folder_mb_peak']} MB at "
                 f"peak, {u['folder_mb_after_trim']} MB after the trimmer (budget {u['budget_mb']} MB)")
    for row in report["worst_traces"]:
        lines.append(f"  {row['trace']}: {row['mb']} MB, read {row['read_s']} s, view step {row['step_s']} s "
                     f"({row['view_mb']} MB)")
    for row in report["refused_traces"]:
        lines.append(f"  {row['trace']}: {row['mb']} MB, " + (f"refused in {row['seconds']} s" if row["refused"] else
                                                               "ACCEPTED (it must be refused)"))
    for row in report["redos"]:
        lines.append(f"  What if, {row['input']}: {row['cpu_s']} CPU s")
    m = report["mcp_privacy"]
    lines.append("  MCP privacy: " + (m["skipped"] if "skipped" in m else
                                      f"the second caller drafted {m['second_caller_history_rounds']} rounds from "
                                      f"history, {m['second_caller_rounds_showing_the_firsts_text']} showing the "
                                      f"first's text (control: {m['control_api_client_history_rounds']} from an API "
                                      "client's own)"))
    t = report["two_tab_audit"]
    lines.append(f"  two tabs' {t['runs_asked']}-run quantized audits: {t['one_token_decodes']} one-token decodes from "
                 f"another client, the slowest {t['slowest_s']} s (None: one unanswered; within {t['within_s']:g} s: "
                 f"{t['all_within']}); "
                 f"idle {t['idle_after_close_s']} s after the tabs closed")
    lines.append("  warm server, then after each pass of cancels and uploads: RSS "
                 + " → ".join(f"{x} MB" for x in report["rss_mb_after_each_pass"])
                 + f"; upload folder {report['upload_folder_mb_before']} → {report['upload_folder_mb_after']} MB")
    return "\n".join(lines)
