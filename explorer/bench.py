"""Side-by-side benchmark: Hugging Face ``generate`` and our methods in one process, interleaved.

Every system decodes every prompt of the shipped set (``assets/prompts.json``) once per repeat, in an
order that rotates between repeats (A B C, B C A, ...), after one warm-up run each; tokens/s is the
total of new tokens over the total of wall seconds of a repeat, and the table reports the median (and
min, max) over repeats. Wall seconds are taken around the whole call (``generate`` or our ``decode``,
trace building included), so the comparison is like for like.

Every run is preceded by the machine's pace probe (``explorer.pace``), and every row keeps its runs' samples
(``pace_ms``): a row whose runs met another pace than plain decoding's, or a lossless row faster than its tokens
per target forward allow, is not printed as a fact (``reports.row_doubt``, the rule of ``explorer.ratios``); nor is
a T(n)/T(1) curve whose medians say T(n) < T(1).
"""

from __future__ import annotations

import datetime
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from . import methods, theory
from .api import load_cached, decode
from .engine import fast
from .engine.controllers import DEFAULT_CONTROLLER, DEFAULT_GAMMA
from .engine.costs import raw_cost_curve, verify_cost_curve
from .bench_table import PHASES, markdown  # the report as a table: the CLI's, the Compare tab's
from .hf_systems import hf_assistant_kwargs, hf_beam_search, hf_generate
from .llama_cpp_peer import LlamaCppPeer
from .trace import acceptance_by_position, alpha_hat
from .errors import ExplorerError
from .limits import clip
from .models import quiet_transformers
from .pace import probe_ms
from .progress import left_after, print_progress
from .quality import token_agreement
from .shipped import ASSETS
from .words import plural

PROMPTS_FILE = ASSETS / "prompts.json"
# today's methods (the README's results table: tests/test_bench_shipped.py holds them together), fastest first:
# the target's 4-bit copy drafting for it and alone, SuffixDecoding, prompt lookup (ours and Hugging Face's),
# the trained drafts, plain decoding and Hugging Face's generate
DEFAULT_SYSTEMS = (
    "hf-generate", "ar", "quantized", "quantized:alone", "suffix", "speculative:prompt-lookup:3",
    "hf-assisted:prompt-lookup:3", "eagle", "eesd",
)


@dataclass(frozen=True)
class System:
    """One way of decoding: Hugging Face's ``hf-generate``, ``hf-assisted:<prompt-lookup:n|early-exit:N>``
    and ``hf-beam:<k>``, or a run of one of the explorer's methods as its record names it
    (``methods.parse_system``: ``ar``, ``eesd``, ``speculative:<draft>[/controller][@γ]``,
    ``bild:<draft>``, ``beam:<exact|004>:<k>:<draft>``, …); ``@γ`` gives a system its own draft length
    (the cap for the TS controllers) instead of the run's ``--gamma``."""

    name: str
    method: str  # hf-generate | hf-assisted | hf-beam | a registered method
    draft: str | None
    controller: str | None
    gamma: int
    options: tuple[tuple[str, object], ...] = ()  # the method's own keywords (beam: width and rule)


HF_SYSTEMS = "hf-generate, hf-assisted:prompt-lookup:n, hf-assisted:early-exit:N[@γ], hf-beam:<k>"
PEER_SYSTEMS = "llama-cpp (the default's GGUF through llama.cpp, where llama-cpp-python is installed)"


def system_grammar() -> str:
    """Every system name the benchmark takes: Hugging Face's, then each method's from its registry record (so
    ``bench --help`` and the refusal of a bad name cannot fall behind a new method)."""
    return f"{HF_SYSTEMS}, {PEER_SYSTEMS} or one of the explorer's: {methods.system_syntax()}"


def parse_system(name: str, gamma: int, controller: str) -> System:
    if name in ("hf-generate", "llama-cpp"):
        return System(name, name, None, None, 0)
    kind, _, rest = name.partition(":")
    if kind == "hf-beam" and rest.isdigit() and 1 <= int(rest) <= 8:
        return System(name, "hf-beam", None, None, 0, (("beam_width", int(rest)),))
    if kind == "hf-assisted":
        draft, at, own_gamma = rest.partition("@")
        if draft.split(":")[0] in ("prompt-lookup", "early-exit") and (not at or (own_gamma.isdigit() and int(own_gamma) >= 1)):
            return System(name, "hf-assisted", draft, "hf-constant", int(own_gamma) if at else gamma)
    keywords = methods.parse_system(name)
    if keywords is None:
        raise ExplorerError(f"unknown system {clip(name, 60)}: use {system_grammar()}")
    method = methods.get(keywords.pop("method"))
    draft = keywords.pop("draft", None)
    own_controller, own_gamma = keywords.pop("controller", None), keywords.pop("gamma", None)
    if method.preset is not None and own_controller is None and own_gamma is None:
        return System(name, method.name, draft, None, 0, tuple(keywords.items()))  # the preset's controller and γ
    return System(name, method.name, draft, own_controller or (controller if method.controller else None),
                  own_gamma or (gamma if method.uses_gamma else 0), tuple(keywords.items()))


def decode_keywords(system: System) -> dict:
    """``explorer.decode`` / ``stream`` keywords for one of our systems (not the ``hf-*`` ones): method,
    draft, γ, controller and the method's own options."""
    if system.method.startswith("hf-") or system.method == "llama-cpp":
        raise ExplorerError(f"{system.name} is another program's decoding, not the explorer's")
    return {"method": system.method, "draft": system.draft, "gamma": system.gamma or None,
            "controller": system.controller, **dict(system.options)}


def load_prompts(path: Path = PROMPTS_FILE) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["prompts"]


def heldout_prompts(count: int = 10) -> list[dict]:
    """``count`` of the trainers' held-out prompts (``assets/train_prompts.json``, split "heldout"), one per
    kind in the bank's order: prompts no draft was trained on and no setting was tuned on, as the shipped
    prompts' ``{"category", "text"}``."""
    from .train.data import load_prompt_bank

    picked, seen = [], set()
    for p in load_prompt_bank("heldout"):
        kind = p.get("category") or p["id"].rsplit("-", 1)[0]
        if kind not in seen and len(picked) < count:
            seen.add(kind)
            picked.append({"category": kind, "text": p["prompt"]})
    return picked


def run(model: str = "default", systems=DEFAULT_SYSTEMS, repeats: int = 3, max_new_tokens: int = 64,
        temperature: float = 0.0, gamma: int = DEFAULT_GAMMA, controller: str = DEFAULT_CONTROLLER, quick: bool = False,
        prompts: list[dict] | None = None, device: str | None = None, dtype: str | None = None,
        progress: Callable[[int, int, str], None] | None = None) -> dict:
    """Run the benchmark and return ``{"rows": [...], "meta": {...}}`` (rows as documented in docs/api.md).

    ``progress(done, total, line)`` is called after each run (default: the line on stderr)."""
    progress = progress or print_progress
    with quiet_transformers():  # HF's generate warns about its own arguments on every call
        return _run(model, systems, repeats, max_new_tokens, temperature, gamma, controller, quick,
                    prompts or load_prompts(), progress, device, dtype)


def _run(model, systems, repeats, max_new_tokens, temperature, gamma, controller, quick, prompts, progress,
         device=None, dtype=None):
    target = load_cached(model, device, dtype)
    if quick:  # one prompt per category, short answers, one repeat: the shortest run that checks every system
        seen, picked = set(), []
        for p in prompts:
            if p["category"] not in seen:
                seen.add(p["category"])
                picked.append(p)
        prompts, max_new_tokens, repeats = picked, min(max_new_tokens, 24), 1
    chosen = [parse_system(s, gamma, controller) for s in systems]
    if not any(s.method == "ar" for s in chosen):
        chosen.insert(0, parse_system("ar", gamma, controller))  # every row is compared with our ar
    peer = LlamaCppPeer(target) if any(s.method == "llama-cpp" for s in chosen) else None  # refused before any work
    ids = [target.encode(p["text"]) for p in prompts]

    assistants = {s.name: hf_assistant_kwargs(target, s.draft, s.gamma) for s in chosen if s.method == "hf-assisted"}

    def once(system: System, prompt_ids: list[int], n: int, session: str = "bench:warm-up"):
        if system.method == "hf-beam":
            out, seconds = hf_beam_search(target, prompt_ids, dict(system.options)["beam_width"], n)
            return out, seconds, None
        if system.method == "llama-cpp":
            if temperature != 0:
                raise ExplorerError("llama-cpp runs greedy only here: leave it out of a sampled benchmark")
            return peer.generate(prompt_ids, n)
        if system.method.startswith("hf-"):
            return hf_generate(target, prompt_ids, n, temperature, **assistants.get(system.name, {}))
        start = time.perf_counter()
        # a session per repeat: a method that learns from earlier outputs (suffix) sees the other prompts'
        # answers of this repeat, never this prompt's own from an earlier repeat or the warm-up
        trace = decode(target, prompt_ids=prompt_ids, temperature=temperature, max_new_tokens=n, seed=0,
                       session=session, **decode_keywords(system))
        return list(trace.output_ids), time.perf_counter() - start, trace

    total, done = repeats * len(ids) * len(chosen), 0
    for system in chosen:  # warm-up: first calls pay for allocations, lazy initialisation and one-time builds
        once(system, ids[0], 8)
    # no guess before anything is timed: the warm-up holds one-time work (the 4-bit copy, compiles), which made
    # a warm-up-based guess 15 min for a 3 min run; every run's line gives the time left from the runs so far
    progress(0, total, f"{plural(total, 'run')} of up to {max_new_tokens} tokens; the time left follows each run, "
             "from this machine's pace")
    max_tokens = max([gamma] + [s.gamma for s in chosen]) + 2
    curve = verify_cost_curve(target, max_tokens=max_tokens)
    raw_curve = raw_cost_curve(target, max_tokens=max_tokens) or curve
    peak_mb: dict[str, float | None] = {s.name: None for s in chosen}
    pace: dict[str, list[float]] = {s.name: [] for s in chosen}  # the probe before each of a system's runs
    # results[system][repeat][prompt] = (output ids, seconds, trace or None)
    results = {s.name: [[None] * len(ids) for _ in range(repeats)] for s in chosen}
    started = time.perf_counter()
    for rep in range(repeats):
        for j, prompt_ids in enumerate(ids):
            for system in chosen[rep % len(chosen):] + chosen[: rep % len(chosen)]:
                pace[system.name].append(round(probe_ms(), 3))
                _reset_peak_rss()
                out = once(system, prompt_ids, max_new_tokens, f"bench:{rep}")
                peak = _peak_rss_mb()
                if peak is not None:
                    peak_mb[system.name] = max(peak_mb[system.name] or 0.0, peak)
                results[system.name][rep][j] = out
                done += 1
                progress(done, total, f"[{done}/{total}] {system.name} · {prompts[j]['category']} · "
                         f"{len(out[0])} tokens · {len(out[0]) / out[1]:.1f} tok/s{left_after(started, done, total)}")
    ratios = [t / curve[0] for t in curve]
    rows = [_row(s, results, prompts, temperature, ratios) | {"peak_rss_mb": peak_mb[s.name], "pace_ms": pace[s.name]}
            for s in chosen]
    return {"rows": rows, "meta": {
        "date": datetime.date.today().isoformat(), "wall_s": round(time.perf_counter() - started, 1),
        "verify_cost_s": list(curve), "verify_cost_ratio": ratios, "verify_cost_median_s": list(raw_curve),
        "model": model, "device": str(target.device), "dtype": str(target.dtype).replace("torch.", ""),
        "prompts": len(ids), "repeats": repeats, "max_new_tokens": max_new_tokens, "temperature": temperature,
        "gamma": gamma, "controller": controller, "torch_threads": torch.get_num_threads(), "quick": quick,
        **fast.speed_record(target.model),
    }}


def _reset_peak_rss() -> None:
    """Reset the kernel's high-water mark of this process's resident memory (Linux)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def _peak_rss_mb() -> float | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _row(system: System, results, prompts, temperature, verify_ratio) -> dict:
    runs = results[system.name]
    ar_runs, hf_runs = results["ar"], results.get("hf-generate")

    def rate(rep_runs, only=None):
        pick = [r for j, r in enumerate(rep_runs) if only is None or prompts[j]["category"] == only]
        return sum(len(r[0]) for r in pick) / sum(r[1] for r in pick)

    rates = [rate(rep) for rep in runs]
    median = statistics.median(rates)
    ar_median = statistics.median(rate(rep) for rep in ar_runs)
    hf_median = statistics.median(rate(rep) for rep in hf_runs) if hf_runs else None
    traces = [r[2] for rep in runs for r in rep if r[2] is not None]
    drafted = sum(t.summary.drafted for t in traces)
    accepted = sum(t.summary.accepted for t in traces)
    forwards = sum(t.summary.target_forwards for t in traces)
    new = sum(t.summary.new_tokens for t in traces)
    cs = [t.summary.c_measured for t in traces if t.summary.c_measured is not None]
    gammas = [t.summary.mean_gamma for t in traces if t.summary.mean_gamma]
    c = statistics.median(cs) if cs else None
    alpha = alpha_hat([r for t in traces for r in t.rounds])
    predicted = predicted_cost = None
    if alpha is not None and c is not None and gammas:
        mean_gamma = statistics.mean(gammas)
        predicted = float(theory.speedup(min(alpha, 1.0), mean_gamma, c))
        ratio = float(np.interp(mean_gamma + 1, np.arange(1, len(verify_ratio) + 1), verify_ratio))
        predicted_cost = float(theory.speedup_with_verify_cost(min(alpha, 1.0), mean_gamma, c, ratio))
    identical = agreement = None
    if temperature == 0:
        pairs = [(runs[k][j][0], ar_runs[k][j][0]) for k in range(len(runs)) for j in range(len(runs[k]))]
        identical = all(out == ref for out, ref in pairs)
        # a lossy system's text against the target's own: the share of plain decoding's tokens it kept
        agreement = statistics.mean(token_agreement(out, ref) for out, ref in pairs) if not identical else None
    # where a token's time goes, from the rounds' own clocks: drafting, the target's verification (the
    # prompt's prefill included), the rest (acceptance, cache commit, bookkeeping)
    ms_per_token = {part: 1000 * sum(getattr(t.summary, f"{part}_s") for t in traces) / new
                    for part in PHASES} if new else None
    categories = sorted({p["category"] for p in prompts})
    by_category = {cat: statistics.median(rate(rep, cat) for rep in runs) /
                   statistics.median(rate(rep, cat) for rep in ar_runs) for cat in categories}
    settings = traces[0].settings if traces else None
    return {
        # Hugging Face's: greedy, or exact; llama.cpp decodes the 4-bit model
        "lossy": bool(settings.lossy) if settings is not None else system.method == "llama-cpp",
        "acceptance_by_position": position_rates([r for t in traces for r in t.rounds]),
        "system": system.name, "method": system.method, "draft": system.draft or (traces[0].draft if traces else None),
        "controller": system.controller if system.draft else (settings.controller if traces and traces[0].draft else None),
        "tokens_per_s": median, "tokens_per_s_min": min(rates), "tokens_per_s_max": max(rates),
        "speedup_vs_hf": median / hf_median if hf_median else None, "speedup_vs_ar": median / ar_median,
        "speedup_vs_ar_by_category": by_category,
        "acceptance_rate": accepted / drafted if drafted else None, "alpha_hat": alpha,
        "tokens_per_target_forward": new / forwards if forwards else None, "c": c, "ms_per_token": ms_per_token,
        "predicted_speedup": predicted, "predicted_speedup_verify_cost": predicted_cost,
        "identical_to_ar": identical, "agreement_with_ar": agreement,
    }


def position_rates(rounds) -> list[float | None] | None:
    """Accepted ÷ tested drafts at draft position 1, 2, … over the rounds; None for a system that drafts
    nothing."""
    tested, accepted = acceptance_by_position([r for r in rounds if r.drafted])
    return [a / t if t else None for a, t in zip(accepted, tested)] or None
