"""A bounded load ("soak") test of the app's public API: ``python -m explorer soak --clients 8 --runs 50``.

An operator's tool (``explorer.tools``): it serves the app in its own process to measure it; the app never
imports it.

The explorer is meant to run as a public Space, where several strangers decode at once through the page
or through the ``/decode`` API. This script checks that the server stays correct and healthy under that
kind of load, on this machine, without touching the network:

1. It decodes every request of the mix once, one at a time, in-process (``explorer.decode`` with the
   options ``Handlers.api_decode`` builds): the reference outputs. Greedy decoding is deterministic, so
   every served output must be *identical* to its reference, whatever ran beside it (``bild`` is lossy,
   but deterministic too). A request the model cannot run (``eesd`` or ``eagle`` without a shipped draft)
   is skipped and said so.
2. It serves ``explorer.ui.serving_demo()`` (what ``python app.py`` serves, with its queue and concurrency
   limits) in this process on a free loopback port. Only loopback hosts are accepted: this is a test, not a
   load tool.
3. ``--clients`` threads, each with its own ``gradio_client.Client`` (its own session), submit
   ``--runs`` decodes each, one after the other (a closed loop: at most ``clients`` requests outstanding).
   The jobs run every request of the mix equally often, in a seeded shuffled order: the methods (ar,
   speculative with prompt-lookup:3 and early-exit:8, eesd, eagle, bita, bild with early-exit:8) times the
   three shortest example prompts of the page, greedy, γ = 4. With ``--cancel-every K`` every K-th
   submission is cancelled 0.3 s after it is submitted, as a visitor who gives up would; the report
   says whether it was queued or running then, and what the client saw.

It reports:

- completion: finished / submitted, cancelled, and errors grouped by message;
- correctness: how many finished outputs equal their reference token for token (mismatches listed);
- memory: the process's resident set size (server, models and clients: one process) sampled every
  second, with its start, peak and end; a leak shows as an end far above the start;
- latency: p50 / p95 / max from submit to result, per request (queueing included) and per method;
- concurrency: the most decodes that computed at once in the server, counted by the app's own job gate
  (``ui.jobs.WORK``: the slots held, sampled 5 times a second; a decode a cancel did not stop still counts
  until its round ends) and for about how long that was over the app's limit (``DECODE_CONCURRENCY``), the
  most decodes under way at once (``WORK.running``: computing, between two rounds or waiting for a slot), and
  how long leftover decodes took to finish after the last client was done;
- wall time.

It is bounded (at most 32 clients and 2000 decodes), so it cannot be turned into a denial of service.
The CLI exits 0 when every job finished or was cancelled, none failed and every output was identical;
else 1. Going over the concurrency limit is reported, not failed: a decode computes only holding one of the
limit's slots (``ui.jobs.gated``), so the count passing the limit would mean the gate leaks.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ipaddress
import json
import math
import os
import random
import socket
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass

from ..engine.controllers import DEFAULT_GAMMA
from ..errors import ExplorerError
from ..limits import MAX_NEW_TOKENS, MAX_SEED, clip

MAX_CLIENTS = 32
MAX_TOTAL_RUNS = 2000
GAMMA = DEFAULT_GAMMA
EXIT_LAYERS = 8  # early-exit:8, or the deepest exit the model has (tiny-random models have 2 layers)
PROMPTS = 3  # the shortest example prompts of the page
CANCEL_AFTER_S = 0.3  # a cancelled job is cancelled this long after it was submitted
JOB_TIMEOUT_S = 900.0  # one request's bound, queueing included
DRAIN_TIMEOUT_S = 120.0  # how long to wait, after the last client, for decodes still running
SAMPLE_EVERY_S = 0.2  # running decodes; the RSS every 5th sample (every second)

# (method, draft): the draft's {exit} becomes the exit depth the model allows
MIX = (("ar", None), ("speculative", "prompt-lookup:3"), ("speculative", "early-exit:{exit}"), ("eesd", None),
       ("eagle", None), ("bita", None), ("bild", "early-exit:{exit}"))


@dataclass(frozen=True)
class Request:
    """One decode the clients submit: ``api_decode``'s arguments besides the shared ones."""

    prompt_no: int
    prompt: str
    method: str
    draft: str | None

    @property
    def label(self) -> str:
        return self.method + (f" {self.draft}" if self.draft else "")


def check_host(host: str) -> str:
    """The host to serve on, if it is loopback (``localhost``, 127.0.0.0/8, ``::1``); else an error."""
    name = (host or "").strip()
    if name.lower() == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        address = None
    if address is None or not address.is_loopback:
        raise ExplorerError(f"the soak test serves and connects on loopback only (127.0.0.1, ::1, localhost), "
                            f"not {clip(host, 60)}")
    return str(address)


def check_args(clients: int, runs: int, max_new_tokens: int, cancel_every: int, seed: int) -> None:
    if not 1 <= clients <= MAX_CLIENTS:
        raise ExplorerError(f"--clients must be from 1 to {MAX_CLIENTS}, got {clients}")
    if runs < 1 or clients * runs > MAX_TOTAL_RUNS:
        raise ExplorerError(f"--runs must be at least 1 and clients × runs at most {MAX_TOTAL_RUNS}, "
                            f"got {clients} × {runs} = {clients * runs}")
    if not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise ExplorerError(f"--max-new-tokens must be from 1 to {MAX_NEW_TOKENS}, got {max_new_tokens}")
    if cancel_every < 0:
        raise ExplorerError(f"--cancel-every must be 0 (never) or a positive count, got {cancel_every}")
    if not 0 <= seed <= MAX_SEED:
        raise ExplorerError(f"--seed must be a whole number from 0 to {MAX_SEED}, got {seed}")


def rss_mb() -> float | None:
    """This process's resident set size in MB (psutil if installed, else /proc/self/status)."""
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except ImportError:
        pass
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _set_offline_env() -> None:
    # Before gradio / huggingface_hub load: no analytics, no Hub (as app.py and the tests set them).
    for name, value in (("GRADIO_ANALYTICS_ENABLED", "False"), ("HF_HUB_DISABLE_TELEMETRY", "1")):
        os.environ.setdefault(name, value)
    if "SPACE_ID" not in os.environ:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")


def plan(model: str, max_new_tokens: int, seed: int, progress=None):
    """The request mix for ``model`` and each request's reference output ids, decoded one at a time.

    Returns (requests, references, skipped): ``skipped`` maps a method label to why the model cannot run
    it (the mix then leaves it out)."""
    from .. import api
    from ..ui.examples import EXAMPLES
    from ..ui.inputs import decode_options

    target = api.load_cached(model, None, None)  # the cache the server's decodes use too
    layers = getattr(getattr(target.model, "config", None), "num_hidden_layers", EXIT_LAYERS + 1)
    depth = max(1, min(EXIT_LAYERS, layers - 1))
    alphabet = getattr(target.tokenizer, "ALPHABET", None)  # tiny-random models know 32 characters
    prompts = []
    for example in sorted(EXAMPLES, key=lambda e: len(e.prompt))[:PROMPTS]:
        text = example.prompt
        if alphabet is not None:
            text = "".join(ch for ch in text.lower() if ch in alphabet)
        prompts.append(text)
    requests, references, skipped = [], {}, {}
    for method, draft in MIX:
        draft = draft.format(exit=depth) if draft else None
        for prompt_no, prompt in enumerate(prompts):
            request = Request(prompt_no, prompt, method, draft)
            if request.label in skipped:
                continue
            try:
                options = decode_options(method, draft, GAMMA, None, 0.0, 0, 1.0, max_new_tokens, seed)
                trace = api.decode(model, prompt, **options)
            except ExplorerError as err:
                skipped[request.label] = str(err)
                continue
            references[request] = list(trace.output_ids)
            requests.append(request)
            if progress:
                progress(f"reference {len(requests)}: {request.label} · prompt {prompt_no} · "
                         f"{len(trace.output_ids)} tokens in {trace.summary.wall_s:.2f} s")
    if not requests:
        raise ExplorerError(f"model {clip(model, 60)} can run none of the soak test's methods: "
                            + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    return requests, references, skipped


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with contextlib.closing(socket.socket(family)) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served(host: str):
    """Serve ``ui.serving_demo()`` (what ``python app.py`` serves) in this process; yield (demo, URL)."""
    from ..ui import launch_options, serving_demo

    demo = serving_demo()
    port = _free_port(host)
    demo.launch(server_name=host, server_port=port, prevent_thread_lock=True, quiet=True, **launch_options())
    try:
        shown = f"[{host}]" if ":" in host else host
        yield demo, f"http://{shown}:{port}/"
    finally:
        with contextlib.redirect_stdout(sys.stderr):  # Gradio prints "Closing server running on port: …"
            demo.close()


class Sampler:
    """Samples, in a thread, the process's RSS (every second) and the decodes running in the server (the app's
    job counters, ``ui.jobs.WORK``: the soak runs no other job)."""

    def __init__(self):
        from ..ui.layout import DECODE_CONCURRENCY

        self.t0 = time.perf_counter()
        self.series: list[dict] = []  # every second: {t, rss_mb, running}
        self.max_running = 0
        self.max_under_way = 0
        self.over_limit_samples = 0
        self.limit = DECODE_CONCURRENCY
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-sampler", daemon=True)

    @staticmethod
    def running_decodes() -> int:
        """Decodes computing a round now (whether or not Gradio still counts them): the slots of ``WORK`` held.
        The API's decode is a generator that Gradio resumes once per round and that holds a slot only while it
        computes, so one that waits between rounds, or that a cancel ended, is not counted."""
        from ..ui.jobs import WORK

        return WORK.busy

    @staticmethod
    def under_way() -> int:
        """Decodes started and not ended (``WORK.running``): computing, between two rounds or waiting for a slot."""
        from ..ui.jobs import WORK

        return WORK.running

    def _loop(self):
        tick = 0
        while not self._stop.is_set():
            running = self.running_decodes()
            self.max_running = max(self.max_running, running)
            self.over_limit_samples += running > self.limit
            self.max_under_way = max(self.max_under_way, self.under_way())
            if tick % round(1 / SAMPLE_EVERY_S) == 0:
                self.series.append({"t": round(time.perf_counter() - self.t0, 1), "rss_mb": _round(rss_mb()),
                                    "running": running})
            tick += 1
            self._stop.wait(SAMPLE_EVERY_S)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.series.append({"t": round(time.perf_counter() - self.t0, 1), "rss_mb": _round(rss_mb()),
                            "running": self.running_decodes()})


def _round(x, digits=1):
    return None if x is None else round(x, digits)


def _client_loop(url: str, client_no: int, clients: int, runs: int, assignment: list[Request], references: dict,
                 max_new_tokens: int, seed: int, model: str, cancel_every: int, jobs: list, lock, t0: float):
    from gradio_client import Client

    try:
        client = Client(url, verbose=False, download_files=False)
    except Exception as err:  # noqa: BLE001  (the server did not answer: every job of this client failed)
        with lock:
            jobs.extend({"job": run * clients + client_no, "client": client_no, "method": None, "prompt": None,
                         "cancel_requested": False, "outcome": "error", "identical": None, "latency_s": None,
                         "error": f"client could not connect: {type(err).__name__}: {_first_line(err)}"}
                        for run in range(runs))
        return
    try:
        for run in range(runs):
            n = run * clients + client_no  # the submission's number, interleaved across clients
            request = assignment[n]
            cancel = cancel_every > 0 and (n + 1) % cancel_every == 0
            record = {"job": n, "client": client_no, "method": request.label, "prompt": request.prompt_no,
                      "cancel_requested": cancel, "outcome": None, "error": None, "identical": None,
                      "new_tokens": None, "stop_reason": None, "latency_s": None}
            submitted = time.perf_counter()
            record["submitted_s"] = round(submitted - t0, 3)
            try:
                job = client.submit(request.prompt, request.method, request.draft or "", GAMMA, 0.0,
                                    max_new_tokens, seed, model, api_name="/decode")
            except Exception as err:  # noqa: BLE001
                outcome, out, message = "error", None, f"submit failed: {type(err).__name__}: {_first_line(err)}"
            else:
                outcome, out, message = _wait(job, cancel, record)
            if outcome == "result":
                _check(record, out, references[request])
            else:
                record["outcome"] = outcome
                record["error" if outcome == "error" else "cancel_note"] = message
            record["latency_s"] = round(time.perf_counter() - submitted, 3)
            with lock:
                jobs.append(record)
    finally:
        client.close()


def _wait(job, cancel: bool, record: dict) -> tuple[str, object, str | None]:
    """Wait for a job (cancelling it first if asked, noting in ``record`` whether it was queued or running
    then): ("result", output, None), ("cancelled", None, what the client said) or ("error", None, message)."""
    from gradio_client.exceptions import AppError

    try:
        if cancel:
            try:
                return "result", job.result(timeout=CANCEL_AFTER_S), None
            except concurrent.futures.TimeoutError:
                with contextlib.suppress(Exception):
                    record["cancelled_while"] = str(job.status().code.value)  # e.g. IN_QUEUE, PROCESSING
                job.cancel()
        out = job.result(timeout=JOB_TIMEOUT_S)
    except concurrent.futures.TimeoutError:
        return "error", None, f"no result within {JOB_TIMEOUT_S:.0f} s"
    except concurrent.futures.CancelledError:
        return "cancelled", None, "CancelledError"
    except AppError as err:  # the server's gr.Error: its message
        return ("cancelled" if cancel else "error"), None, _first_line(err) or type(err).__name__
    except Exception as err:  # noqa: BLE001  (count it and go on; the server gone shows as many of these)
        # gradio_client 2.7 reports a job cancelled while it ran as a KeyError about a response without
        # 'data': on a job we cancelled, any failure is the cancel as the client saw it
        return ("cancelled" if cancel else "error"), None, f"{type(err).__name__}: {_first_line(err)}"
    if out is None and cancel:
        return "cancelled", None, "no output"
    return "result", out, None


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else ""


def _check(record: dict, out, reference: list[int]) -> None:
    """A result against its reference: finished and identical, or a cancelled run's prefix, or wrong."""
    try:
        data = json.loads(out)
        ids = [int(i) for i in data["output_ids"]]
        stop = data.get("summary", {}).get("stop_reason")
    except (TypeError, ValueError, KeyError):
        record["outcome"], record["error"] = "error", f"not a trace: {clip(out, 60)}"
        return
    record["new_tokens"], record["stop_reason"] = len(ids), stop
    if ids == reference:
        record["outcome"], record["identical"] = "finished", True
    elif record["cancel_requested"] and ids == reference[: len(ids)]:  # stopped early by the cancel
        record["outcome"], record["identical"] = "cancelled", None
        record["partial"] = True
    else:
        record["outcome"], record["identical"] = "finished", False
        record["first_difference"] = next((i for i, (a, b) in enumerate(zip(ids, reference)) if a != b),
                                          min(len(ids), len(reference)))


def run(clients: int = 8, runs: int = 50, max_new_tokens: int = 16, model: str = "default", cancel_every: int = 0,
        seed: int = 0, host: str = "127.0.0.1", progress=None) -> dict:
    """Run the soak test and return its report (see the module docstring); ``progress`` gets status lines."""
    host = check_host(host)
    check_args(clients, runs, max_new_tokens, cancel_every, seed)
    _set_offline_env()
    say = progress or (lambda line: None)
    rss_before = rss_mb()
    t_ref = time.perf_counter()
    requests, references, skipped = plan(model, max_new_tokens, seed, say)
    reference_s = time.perf_counter() - t_ref
    for label, why in skipped.items():
        say(f"skipped {label}: {why}")
    from ..ui.layout import DECODE_CONCURRENCY

    jobs: list[dict] = []
    lock = threading.Lock()
    with served(host) as (_, url):
        say(f"serving on {url}; {clients} clients × {runs} decodes ({clients * runs} in all)")
        # job n runs assignment[n]: every request equally often, in a seeded shuffled order (so that a
        # cancel pattern never lines up with the methods)
        assignment = [requests[n % len(requests)] for n in range(clients * runs)]
        random.Random(seed).shuffle(assignment)
        sampler = Sampler().start()
        t0 = time.perf_counter()
        threads = [threading.Thread(target=_client_loop, name=f"soak-client-{c}",
                                    args=(url, c, clients, runs, assignment, references, max_new_tokens, seed, model,
                                          cancel_every, jobs, lock, t0), daemon=True) for c in range(clients)]
        for thread in threads:
            thread.start()
        next_report = 10.0
        while alive := [t for t in threads if t.is_alive()]:
            alive[0].join(timeout=1.0)
            elapsed = time.perf_counter() - t0
            if elapsed >= next_report:
                with lock:
                    done = len(jobs)
                say(f"{elapsed:5.0f} s · {done}/{clients * runs} done · {Sampler.running_decodes()} decoding · "
                    f"RSS {rss_mb() or 0:.0f} MB")
                next_report += 10.0
        wall_s = time.perf_counter() - t0
        # decodes a cancel did not stop may still be running: wait for them, and say how long it took
        drain_start = time.perf_counter()
        running_after = Sampler.running_decodes()
        while Sampler.running_decodes() and time.perf_counter() - drain_start < DRAIN_TIMEOUT_S:
            time.sleep(0.1)
        drain_s = time.perf_counter() - drain_start
        sampler.stop()
        still_running = Sampler.running_decodes()
    return _report(jobs, sampler, references, skipped, dict(
        clients=clients, runs=runs, max_new_tokens=max_new_tokens, model=model, cancel_every=cancel_every,
        seed=seed, gamma=GAMMA, temperature=0.0, cancel_after_s=CANCEL_AFTER_S, host=host,
        requests=len(requests)), wall_s, reference_s, rss_before,
        dict(limit=DECODE_CONCURRENCY, running_when_clients_done=running_after, drain_s=round(drain_s, 2),
             running_at_end=still_running))


def _report(jobs, sampler, references, skipped, config, wall_s, reference_s, rss_before, concurrency) -> dict:
    jobs = sorted(jobs, key=lambda j: j["job"])
    finished = [j for j in jobs if j["outcome"] == "finished"]
    latencies = [j["latency_s"] for j in finished]
    per_method = {}
    for label in dict.fromkeys(j["method"] for j in jobs):
        mine = [j for j in jobs if j["method"] == label]
        lat = [j["latency_s"] for j in mine if j["outcome"] == "finished"]
        per_method[label] = {"submitted": len(mine), "finished": len(lat),
                             "identical": sum(j["identical"] is True for j in mine),
                             "p50_s": _round(percentile(lat, 50), 3), "p95_s": _round(percentile(lat, 95), 3)}
    rss = [s["rss_mb"] for s in sampler.series if s["rss_mb"] is not None]
    limit = concurrency["limit"]
    return {
        "config": config,
        "wall_s": round(wall_s, 2),
        "reference_s": round(reference_s, 2),
        "skipped": skipped,
        "completion": {
            "planned": config["clients"] * config["runs"],
            "submitted": len(jobs),
            "finished": len(finished),
            "cancel_requested": sum(j["cancel_requested"] for j in jobs),
            "cancelled": sum(j["outcome"] == "cancelled" for j in jobs),
            "cancelled_partial": sum(bool(j.get("partial")) for j in jobs),
            "finished_despite_cancel": sum(j["cancel_requested"] and j["outcome"] == "finished" for j in jobs),
            "errors": dict(Counter(j["error"] for j in jobs if j["outcome"] == "error").most_common()),
            "cancelled_while": dict(Counter(j.get("cancelled_while", "done") for j in jobs
                                            if j["cancel_requested"]).most_common()),
            "cancel_seen_as": dict(Counter(j.get("cancel_note") or "a partial trace" for j in jobs
                                           if j["outcome"] == "cancelled").most_common()),
        },
        "correctness": {
            "checked": len(finished),
            "identical": sum(j["identical"] is True for j in finished),
            "mismatches": [{k: j[k] for k in ("job", "method", "prompt", "new_tokens", "first_difference")}
                           for j in finished if j["identical"] is False][:20],
        },
        "latency_s": {"p50": _round(percentile(latencies, 50), 3), "p95": _round(percentile(latencies, 95), 3),
                      "max": _round(max(latencies, default=None), 3),
                      "mean": _round(sum(latencies) / len(latencies), 3) if latencies else None},
        "per_method": per_method,
        "rss_mb": {"before_models": _round(rss_before), "start": rss[0] if rss else None,
                   "peak": max(rss, default=None), "end": rss[-1] if rss else None, "series": sampler.series},
        "concurrency": {**concurrency, "max_running_decodes": sampler.max_running,
                        "max_under_way": sampler.max_under_way,
                        "over_limit_s": round(sampler.over_limit_samples * SAMPLE_EVERY_S, 1),
                        "within_limit": sampler.max_running <= limit},
        "jobs": jobs,
    }


def summary(report: dict) -> str:
    """The report in a few readable lines."""
    c, k, r, lat, cc = (report["completion"], report["correctness"], report["rss_mb"], report["latency_s"],
                        report["concurrency"])
    cfg = report["config"]

    def s(x):
        return "–" if x is None else f"{x:.2f} s"

    def mb(x):
        return "–" if x is None else f"{x:.0f} MB"

    lines = [
        f"soak: {cfg['clients']} clients × {cfg['runs']} decodes · model {cfg['model']} · {cfg['max_new_tokens']} new "
        f"tokens · {cfg['requests']} distinct requests · wall {report['wall_s']:.1f} s "
        f"(+ {report['reference_s']:.1f} s of reference decodes)",
        f"completion: {c['finished']}/{c['submitted']} finished · {c['cancelled']} cancelled "
        f"({c['cancel_requested']} cancel requests, {c['cancelled_partial']} stopped part-way, "
        f"{c['finished_despite_cancel']} finished anyway) · {sum(c['errors'].values())} errors",
    ]
    lines += [f"  error ×{n}: {msg}" for msg, n in c["errors"].items()]
    if c["cancel_requested"]:
        lines.append("  at the cancel the job was: " + ", ".join(f"{state} ×{n}" for state, n in
                                                                 c["cancelled_while"].items()))
    lines += [f"  cancelled ×{n}, the client saw: {msg}" for msg, n in c["cancel_seen_as"].items()]
    lines.append(f"correctness: {k['identical']}/{k['checked']} finished outputs identical to the one-at-a-time "
                 f"reference" + ("" if k["identical"] == k["checked"] else f" · MISMATCHES: {k['mismatches']}"))
    lines.append(f"latency (submit → result, finished only): p50 {s(lat['p50'])} · p95 {s(lat['p95'])} · "
                 f"max {s(lat['max'])}")
    lines += [f"  {str(label):<28} {m['finished']:>4}/{m['submitted']:<4} p50 {s(m['p50_s'])} · p95 {s(m['p95_s'])}"
              for label, m in report["per_method"].items()]
    lines.append(f"RSS: {mb(r['before_models'])} before the models · start {mb(r['start'])} · peak {mb(r['peak'])} "
                 f"· end {mb(r['end'])} ({len(r['series'])} samples)")
    within = "within the limit" if cc["within_limit"] else f"OVER the limit for about {cc['over_limit_s']:.1f} s"
    slots = f", at most {cc['max_under_way']} under way"
    lines.append(f"concurrency: at most {cc['max_running_decodes']} decodes ran at once (limit {cc['limit']}"
                 f"{slots}) · {within} · "
                 f"{cc['running_when_clients_done']} still running when the clients were done, drained in "
                 f"{cc['drain_s']:.1f} s" + (f" · {cc['running_at_end']} STILL RUNNING" if cc["running_at_end"] else ""))
    for label, why in report["skipped"].items():
        lines.append(f"skipped {label}: {why}")
    return "\n".join(lines)
