"""Every bound the explorer enforces, in one place: the API, the CLI and the page read them from here.

The explorer is meant to run as a public Space where strangers type prompts and upload traces, so each
size a user controls has a ceiling. Each is overridable by an environment variable (read once, at
import); a value that is not a whole number in the allowed range is ignored with a warning, so a typo
never lifts a bound. ``SECURITY.md`` states the threat model these serve.

On a Hugging Face Space (``SPACE_ID`` is set) ``hf:`` models are limited to an allow-list; elsewhere
any Hub id may be loaded (the person running the process owns the machine).
"""

from __future__ import annotations

import logging
import math
import os

from .errors import ExplorerError

log = logging.getLogger(__name__)

ON_SPACE = "SPACE_ID" in os.environ


def _env_int(name: str, default: int, lowest: int, highest: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not lowest <= value <= highest:
        log.warning("%s=%r ignored: use a whole number from %d to %d; keeping %d", name, raw, lowest, highest, default)
        return default
    return value


# -- a decode -----------------------------------------------------------------------------------------
MAX_NEW_TOKENS = _env_int("EXPLORER_MAX_NEW_TOKENS", 4096, 1, 32768)
MAX_GAMMA = 64  # tokens drafted per round: beyond this no draft in this project is accepted anyway
MAX_PROMPT_CHARS = _env_int("EXPLORER_MAX_PROMPT_CHARS", 32_000, 1, 10_000_000)
MAX_SEED = 2**63 - 1  # NumPy's and torch's generators take 64-bit seeds
MAX_SPEC_CHARS = 200  # a model or draft spec; longer ones are refused, and never echoed whole

# -- sampling: one rule for every surface (page, API, MCP, CLI), checked by ``engine.sampling.SamplingConfig`` ----
# A temperature is 0 (greedy) or from MIN_TEMPERATURE to MAX_TEMPERATURE. Below 0.01 sampling is greedy to
# float32's precision: a logit gap of 1 becomes e^(-1/0.01) = e^-100 ≈ 4e-44, under float32's smallest normal
# number; and a tiny one broke it: 1e-45 is 0 in float32 and 1e-300 overflowed the logits to inf, so softmax gave
# NaN and torch.multinomial raised (issue 51).
MIN_TEMPERATURE = 0.01
MAX_TEMPERATURE = 100.0


def check_temperature(value) -> float:
    """``value`` as a temperature: 0 (greedy) or from ``MIN_TEMPERATURE`` to ``MAX_TEMPERATURE``; one line
    (``ExplorerError``) for anything else: a tiny positive one, a negative, NaN, ±inf, text, a bool."""
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if number is not None and (number == 0 or MIN_TEMPERATURE <= number <= MAX_TEMPERATURE):
        return float(number)
    shown = clip(value, 40) if number is None or not math.isfinite(number) else f"{number:g}"
    raise ExplorerError(f"temperature must be 0 (greedy) or from {MIN_TEMPERATURE:g} to {MAX_TEMPERATURE:g}, "
                        f"got {shown}" + (": below that, sampling is greedy anyway: use 0"
                                          if number is not None and 0 < number < MIN_TEMPERATURE else ""))


# -- uploaded traces and reports ----------------------------------------------------------------------
MAX_TRACE_BYTES = _env_int("EXPLORER_MAX_TRACE_MB", 32, 1, 4096) * 2**20
MAX_TRACE_ROUNDS = _env_int("EXPLORER_MAX_TRACE_ROUNDS", 4096, 1, 1_000_000)
MAX_TRACE_TOKENS = _env_int("EXPLORER_MAX_TRACE_TOKENS", 40_000, 1, 10_000_000)  # prompt + output
MAX_TOKEN_ID = 2**31 - 1  # no vocabulary is larger; an id beyond the model's shows as <id>
MAX_JSON_DEPTH = 32  # a trace nests 6 deep; 10 000-deep JSON would exhaust Python's recursion
# What one trace may hold, each generously above what the engine writes:
MAX_PIECE_CHARS = 256  # one token's text piece (tokenizers' longest pieces are a few dozen characters)
MAX_NAME_CHARS = 1000  # a model, draft, controller or device name (a spec is at most MAX_SPEC_CHARS)
MAX_TRACE_TOP = 16  # alternatives per position: the engine keeps 5; BiTA lists a node's siblings (top-k ≤ 10)
MAX_TREE_POSITIONS = 1024  # BiTA's tree nodes + mask tokens in one forward (methods.bita.tree.MAX_TREE_INPUT)
MAX_TREE_PROMPT = 256  # BiTA's prompt tokens (methods.bita.tokens.check_counts)
MAX_TRACE_SECONDS = 1e7  # any one time in a trace (four months)
MAX_PACE_SAMPLES = 256  # a trace's machine-pace samples (``explorer.pace.PaceLog`` thins a long run's to fit)
MAX_FREE_VALUES = 4096  # values in a round's free-form ``controller`` or ``detail`` (the engine's: under 200)
MAX_REPORT_BYTES = 2**20  # a benchmark report (the shipped one: 14 KB)
# The runs and uploads a session keeps for "your runs", in trace JSON bytes (in memory ≈ 9× that: a legal
# 29 MB float-heavy trace took 270 MB of RSS): per session, and for all sessions together
MAX_SESSION_TRACE_BYTES = _env_int("EXPLORER_SESSION_TRACES_MB", 40, 1, 100_000) * 2**20
MAX_STORED_TRACE_BYTES = _env_int("EXPLORER_STORED_TRACES_MB", 160, 1, 1_000_000) * 2**20
# Uploads and the files offered for download, on disk together (Gradio's folder and the trace files)
MAX_UPLOAD_BYTES = _env_int("EXPLORER_UPLOADS_MB", 512, 64, 1_000_000) * 2**20
MAX_REPORT_ROWS = 256  # systems in one benchmark report

# -- visitors and their long jobs (``ui.long_jobs``) ----------------------------------------------------------
# Proxies in front of the app that append the client's address to X-Forwarded-For: a Space has one (its
# gateway); a server reached directly has none, and then the socket's peer is the visitor
PROXY_HOPS = _env_int("EXPLORER_PROXY_HOPS", 1 if ON_SPACE else 0, 0, 8)
# The longest a long job (the sampling audit, the race, the theory lab, the BiLD sweep, a measured what-if) may take
# on this machine, priced from its measured pace before it starts: two tabs' 2 000-run `quantized` audits were
# admitted by a token count and would have taken ~40 minutes each (issue 51)
MAX_JOB_SECONDS = _env_int("EXPLORER_MAX_JOB_S", 180, 10, 86_400)

# -- loaded models ------------------------------------------------------------------------------------
MODEL_CACHE_BYTES = _env_int("EXPLORER_MODEL_CACHE_MB", 4096, 64, 1_000_000) * 2**20
# Models not yet loaded that one visitor of the served app may load (the default aside), per window: 70 distinct
# tiny models from one client pushed everything else out of the cache (issue 51)
VISITOR_MODEL_LOADS = _env_int("EXPLORER_VISITOR_MODEL_LOADS", 8, 1, 100_000)
VISITOR_LOADS_WINDOW_S = 3600
HF_MAX_PARAMS = _env_int("EXPLORER_HF_MAX_PARAMS_M", 1000 if ON_SPACE else 1_000_000, 1, 1_000_000) * 10**6
# The GPU pair's target (``explorer.pairs``): a Space with a GPU also loads it, and up to its size
GPU_PAIR_TARGET = "HuggingFaceTB/SmolLM2-1.7B-Instruct"
GPU_SPACE_MAX_PARAMS = 2000 * 10**6


def on_zero_gpu() -> bool:
    """Whether this is a ZeroGPU Space (``SPACES_ZERO_GPU`` read as the ``spaces`` package reads it)."""
    return str(os.environ.get("SPACES_ZERO_GPU", "")).strip().lower() in ("1", "t", "true")


def gpu_present() -> bool:
    """A GPU this process can decode on: a ZeroGPU Space (attached per call) or a CUDA device."""
    if on_zero_gpu():
        return True
    import torch

    return torch.cuda.is_available()


def hf_max_params() -> int:
    """The most parameters an ``hf:`` model may have: ``HF_MAX_PARAMS``, raised on a Space with a GPU to fit
    the GPU pair's target (unless ``EXPLORER_HF_MAX_PARAMS_M`` says otherwise)."""
    if ON_SPACE and "EXPLORER_HF_MAX_PARAMS_M" not in os.environ and gpu_present():
        return max(HF_MAX_PARAMS, GPU_SPACE_MAX_PARAMS)
    return HF_MAX_PARAMS


def hf_allow_list() -> frozenset[str] | None:
    """Hub ids an ``hf:`` model may name: ``EXPLORER_HF_ALLOW`` (comma-separated; ``*`` = any), by
    default the SmolLM2 family on a Space (with the GPU pair's 1.7B target where a GPU is present) and any
    id elsewhere (``None``)."""
    raw = os.environ.get("EXPLORER_HF_ALLOW")
    if raw is None:
        raw = ("HuggingFaceTB/SmolLM2-135M-Instruct,HuggingFaceTB/SmolLM2-360M-Instruct,"
               "HuggingFaceTB/SmolLM2-135M,HuggingFaceTB/SmolLM2-360M") if ON_SPACE else "*"
        if ON_SPACE and gpu_present():
            raw += f",{GPU_PAIR_TARGET}"
    ids = {part.strip() for part in raw.split(",") if part.strip()}
    return None if "*" in ids else frozenset(ids)


def clip(text: object, limit: int = 80) -> str:
    """``repr`` of a user's value cut to ``limit`` characters, for error messages that echo it."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
