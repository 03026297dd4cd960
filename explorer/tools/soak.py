"""A bounded load ("soak") test of the app's public API: ``python -m explorer soak --clients 8 --runs 50``.

An operator's tool (``explorer.tools``): it serves the app in its own process to measure it; the app never
imports it. This module plans the mix, runs it and writes the report; the clients are ``soak_clients``, the
served app and what samples it ``soak_server``.

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

import ipaddress
import math
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass

from ..errors import ExplorerError
from ..limits import MAX_NEW_TOKENS, MAX_SEED, clip
from .soak_clients import CANCEL_AFTER_S, GAMMA, client_loop
from .soak_server import SAMPLE_EVERY_S, Sampler, rounded, rss_mb, served, set_offline_env

MAX_CLIENTS = 32
MAX_TOTAL_RUNS = 2000
EXIT_LAYERS = 8  # early-exit:8, or the deepest exit the model has (tiny-random models have 2 layers)
PROMPTS = 3  # the shortest example prompts of the page
DRAIN_TIMEOUT_S = 120.0  # how long to wait, after the last client, for decodes still running

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


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


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


def run(clients: int = 8, runs: int = 50, max_new_tokens: int = 16, model: str = "default", cancel_every: int = 0,
        seed: int = 0, host: str = "127.0.0.1", progress=None) -> dict:
    """Run the soak test and return its report (see the module docstring); ``progress`` gets status lines."""
    host = check_host(host)
    check_args(clients, runs, max_new_tokens, cancel_every, seed)
    set_offline_env()
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
        threads = [threading.Thread(target=client_loop, name=f"soak-client-{c}",
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
                             "p50_s": rounded(percentile(lat, 50), 3), "p95_s": rounded(percentile(lat, 95), 3)}
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
        "latency_s": {"p50": rounded(percentile(latencies, 50), 3), "p95": rounded(percentile(latencies, 95), 3),
                      "max": rounded(max(latencies, default=None), 3),
                      "mean": rounded(sum(latencies) / len(latencies), 3) if latencies else None},
        "per_method": per_method,
        "rss_mb": {"before_models": rounded(rss_before), "start": rss[0] if rss else None,
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
