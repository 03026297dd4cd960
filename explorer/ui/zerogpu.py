"""ZeroGPU: the page's GPU work on Hugging Face's shared GPUs.

On a ZeroGPU Space (``SPACES_ZERO_GPU`` set) a GPU is attached only while a function decorated with
``spaces.GPU`` runs, in a worker process forked from the app's: what the worker computes reaches the app
only as its (pickled) return value, and its exceptions come back as a generic "worker error" unless they
are ``gr.Error``. So every job that decodes is an *entry point* here: the whole job in one call (no
streaming, no callbacks), plain data back (trace JSON, report dicts; never a tensor), the job's own errors
carried back as data and raised again in the app as the one line they were, and a ``duration`` estimated
from the request (tokens × the pace measured on this Space's earlier GPU runs, bounded), which is what the
visitor's quota is charged up front.

When no GPU can be had (the visitor's quota is spent, the queue timed out, none is free), ``spaces`` raises
a ``gr.Error`` titled "ZeroGPU …"; it becomes ``GpuUnavailable``, one line, and the page offers the CPU.

Off ZeroGPU ``spaces.GPU`` returns the function unchanged (and without the ``spaces`` package there is no
decorator at all): the handlers stream on the app's own device as before and never call these entry
points unless ``ON_ZERO_GPU``.
"""

from __future__ import annotations

import functools
import html
import logging
import re
import statistics
import threading
from collections import deque
from typing import Callable

import explorer
from explorer.errors import ExplorerError, one_line
from explorer.limits import on_zero_gpu

log = logging.getLogger(__name__)


ON_ZERO_GPU = on_zero_gpu()
HARDWARE = ("GPU", "CPU")  # the page's choice on a ZeroGPU Space (its "Hardware" control)

try:  # the decorator's home; where ``spaces`` is missing (a plain CPU install) nothing is decorated
    import spaces

    GPU = spaces.GPU
except ImportError:
    GPU = None

# What a call may ask for: ZeroGPU charges the quota by the duration asked (not used), refuses durations
# above its limit, and queues long requests behind short ones.
MIN_DURATION_S, MAX_DURATION_S = 15, 120
START_S = 10.0  # a worker's start: the fork, the weights onto the GPU, CUDA's first kernels (not yet measured)
# Seconds per token before this Space has measured its own: 4× the H100's plain decoding of the default model
# (32.9 tok/s, docs/measurements.md), margin for a larger model and a shared, busier card.
FIRST_PACE_S = 0.12


class GpuUnavailable(ExplorerError):
    """No GPU could be had for this job (ZeroGPU's quota, queue or pool); the message is one line."""


class Pace:
    """Seconds per decoded token of this Space's last GPU runs (median of the newest ``keep``): what a
    new request's duration is estimated with. Lives in the app's process (a worker's memory is gone)."""

    def __init__(self, keep: int = 16):
        self._seen: deque[float] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def add(self, seconds: float, tokens: int) -> None:
        if tokens > 0 and seconds > 0:
            with self._lock:
                self._seen.append(seconds / tokens)

    def seconds_per_token(self) -> float:
        with self._lock:
            return statistics.median(self._seen) if self._seen else FIRST_PACE_S


PACE = Pace()
ENTRY_POINTS: dict[str, Callable[..., int]] = {}  # name → the duration it asks for, from its arguments


HUB_LOAD_S = 45.0  # a Hub model the worker fetches and moves to the GPU inside the call (the default is loaded at start-up)


def duration_s(tokens: float, *models) -> int:
    """What a job that decodes about ``tokens`` tokens with ``models`` (specs; a Hub model is fetched inside the
    call) asks ZeroGPU for, in whole seconds, bounded."""
    hub = sum("hf:" in str(spec) for spec in models)
    wanted = START_S + hub * HUB_LOAD_S + 1.5 * tokens * PACE.seconds_per_token()
    return int(min(MAX_DURATION_S, max(MIN_DURATION_S, round(wanted))))


def gpu_entry(tokens: Callable[..., float], models: Callable[..., tuple] = lambda *a, **k: ()):
    """Make a job a GPU entry point: ``spaces.GPU`` with a duration of ``duration_s(tokens(*args),
    *models(*args))``; the
    job's ``ExplorerError`` (a user's mistake, said in one line) and any other failure (logged in the
    worker) come back as data and are raised again here; a refused GPU raises ``GpuUnavailable``."""

    def wrap(job):
        @functools.wraps(job)
        def in_worker(*args, **kwargs):
            try:
                return "ok", job(*args, **kwargs)
            except ExplorerError as err:
                return "error", one_line(err)
            except Exception:  # the stack trace stays in the worker's log
                log.exception("%s failed on the GPU", job.__name__)
                return "failed", job.__name__

        def duration(*args, **kwargs) -> int:
            return duration_s(tokens(*args, **kwargs), *models(*args, **kwargs))

        decorated = GPU(in_worker, duration=duration) if GPU is not None else in_worker
        ENTRY_POINTS[job.__name__] = duration

        @functools.wraps(job)
        def call(*args, **kwargs):
            try:
                kind, value = decorated(*args, **kwargs)
            except Exception as err:
                if refused(err):
                    raise GpuUnavailable(refusal_line(err)) from None
                raise
            if kind == "error":
                raise ExplorerError(value)
            if kind == "failed":
                raise RuntimeError(f"{value} failed on the GPU worker (its log has the stack trace)")
            return value

        call.entry_point = job.__name__
        return call

    return wrap


def refused(err: Exception) -> bool:
    """Whether ``err`` is ZeroGPU saying no GPU can be had (``spaces`` raises ``gr.Error`` titled "ZeroGPU …";
    its worker's own failures are titled "ZeroGPU worker error" and are not a refusal)."""
    title = str(getattr(err, "title", "") or "")
    return title.startswith("ZeroGPU") and title != "ZeroGPU worker error"


def refusal_line(err: Exception) -> str:
    """ZeroGPU's reason as plain text in one line (its messages carry links as HTML or Markdown)."""
    title = str(getattr(err, "title", "") or "ZeroGPU")
    # cut first: both patterns rescan the rest of the text from every "<" or "[" left open (quadratic in its length)
    message = html.unescape(re.sub(r"<[^>]+>", "", str(getattr(err, "message", "") or err)[:2000]))
    message = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", message)  # [text](link) → text
    return one_line(f"no GPU for this run ({title.removeprefix('ZeroGPU ')}: {message}). Choose Hardware: CPU to "
                    "decode on the Space's CPU (slower; no GPU quota), or try again later", limit=400)


def use_gpu(hardware: str | None) -> bool:
    """Whether a job goes to a ZeroGPU entry point: on a ZeroGPU Space, unless the visitor chose the CPU."""
    return ON_ZERO_GPU and hardware != "CPU"


def device_for(hardware: str | None) -> str | None:
    """The device a job that runs in the app's own process decodes on: the CPU where the visitor chose it
    on ZeroGPU (there the app's process reports a GPU it cannot use outside an entry point); else the
    engine's default."""
    return "cpu" if ON_ZERO_GPU and hardware == "CPU" else None


# -- the entry points: whole jobs, plain data in and out ------------------------------------------------


def _decode_tokens(model, prompt, session, options, baseline, sessions) -> float:
    return options.get("max_new_tokens", 64) * (2 if baseline else 1)


@gpu_entry(_decode_tokens, lambda model, prompt, session, options, *rest: (model, options.get("draft")))
def decode_run(model: str, prompt: str, session: str, options: dict, baseline: bool,
               sessions: dict) -> dict:
    """A whole decode (and, with ``baseline``, plain decoding on its prompt and settings right after it):
    ``{"trace", "baseline"}`` as trace JSON, and ``sessions``, what the methods keep of the session's runs after it
    (``methods.export_sessions``: ``suffix`` drafts from its finished outputs; the worker's memory does not outlive
    the call, so the app keeps them)."""
    from explorer import methods

    from .baseline import baseline_stream

    methods.replace_sessions(session, sessions)
    trace = explorer.stream(model, prompt, session=session, **options).run()
    plain = baseline_stream(trace).run() if baseline and trace.rounds else None
    return {"trace": trace.to_json(), "baseline": plain.to_json() if plain is not None else None,
            "sessions": methods.export_sessions(session)}


def decode(model: str, prompt: str, session: str, options: dict, baseline: bool) -> tuple:
    """``decode_run`` from the app's side: what the methods keep of the session handed over and taken back, the
    pace of the runs recorded; (the trace, plain decoding's trace or None) as ``RunTrace``s."""
    from explorer import methods

    result = decode_run(model, prompt, session, options, baseline, methods.export_sessions(session))
    methods.replace_sessions(session, result["sessions"])
    runs = [explorer.load_trace(text) if text else None for text in (result["trace"], result["baseline"])]
    for run in filter(None, runs):
        PACE.add(run.summary.wall_s, run.summary.new_tokens)
    return tuple(runs)


@gpu_entry(lambda model, prompt, runs, temperature, options: 2 * runs,
           lambda model, prompt, runs, temperature, options: (model, options.get("draft")))
def audit_run(model: str, prompt: str, runs: int, temperature: float, options: dict):
    """The sampling audit (``explorer.audit.sampling_audit``): a ``SamplingAudit`` (plain numbers)."""
    from explorer.audit import sampling_audit

    return sampling_audit(model, prompt, runs=runs, temperature=temperature, **options)


def _race_tokens(model, prompt, systems, keywords, sessions) -> float:
    from explorer.race import WARM_UP_TOKENS, parse_lanes

    return len(parse_lanes(systems)) * (keywords.get("max_new_tokens", 64) + WARM_UP_TOKENS)


@gpu_entry(_race_tokens, lambda model, prompt, systems, keywords, sessions: (model, *systems))
def race_run(model: str, prompt: str, systems: list[str], keywords: dict, sessions: dict) -> dict:
    """A whole race (``explorer.race``): its lanes as the page draws them at the end, its report, and what the
    methods keep of the session after it (as ``decode_run``)."""
    from explorer import methods, race

    session = keywords.get("session", "")
    methods.replace_sessions(session, sessions)
    lanes = race.run(race.start(model, prompt, systems, **keywords))
    return {"lanes": race.snapshot(lanes), "report": race.race_report(lanes),
            "sessions": methods.export_sessions(session)}


@gpu_entry(lambda draft, fallbacks, rollbacks, tokens, prompts:
           (1 + len(fallbacks) * len(rollbacks)) * len(prompts) * tokens)
def sweep_run(draft: str, fallbacks: list[float], rollbacks: list[float], tokens: int, prompts: list[str]) -> dict:
    """BiLD's threshold sweep on the default model (the sweep its record declares, run by ``explorer.sweep.run``): its
    report."""
    from explorer import sweep

    return sweep.run("bild", "default", draft, {"fallbacks": tuple(fallbacks), "rollbacks": tuple(rollbacks)},
                     max_new_tokens=tokens, prompts=prompts)


@gpu_entry(lambda alphas, gammas, costs, tokens, prompts: (2 + len(alphas) * len(gammas) * len(costs)) * tokens)
def lab_run(alphas: list[float], gammas: list[int], costs: list[float], tokens: int, prompts: list[str]) -> dict:
    """The theory lab on the default model (``explorer.sweep.theory_sweep``): its report."""
    from explorer import sweep

    return sweep.theory_sweep("default", alphas, gammas, costs, tokens, prompts=prompts)


@gpu_entry(lambda positions: 8 * (positions + 1))
def verify_cost_run(positions: int) -> tuple:
    """T(n)/T(1) for n = 1 … positions + 1 on the GPU (``explorer.whatif.measure_verify_cost``)."""
    from explorer import whatif

    return whatif.measure_verify_cost("default", positions)
