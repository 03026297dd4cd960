"""Side-by-side benchmark: Hugging Face ``generate`` and our methods in one process, interleaved.

Every system decodes every prompt of the shipped set (``assets/prompts.json``) once per repeat, in an
order that rotates between repeats (A B C, B C A, ...), after one warm-up run each; tokens/s is the
total of new tokens over the total of wall seconds of a repeat, and the table reports the median (and
min, max) over repeats. Wall seconds are taken around the whole call (``generate`` or our ``decode``,
trace building included), so the comparison is like for like.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from . import theory
from .api import _load_cached, decode
from .errors import ExplorerError

PROMPTS_FILE = Path(__file__).resolve().parent.parent / "assets" / "prompts.json"
DEFAULT_SYSTEMS = ("hf-generate", "ar", "speculative:prompt-lookup:3", "speculative:early-exit:4")


@dataclass(frozen=True)
class System:
    """One way of decoding: ``hf-generate``, ``ar`` or ``speculative:<draft>``."""

    name: str
    method: str
    draft: str | None
    controller: str
    gamma: int


def parse_system(name: str, gamma: int, controller: str) -> System:
    if name in ("hf-generate", "ar"):
        return System(name, name, None, "-", 0)
    kind, _, draft = name.partition(":")
    if kind == "speculative" and draft:
        return System(name, "speculative", draft, controller, gamma)
    raise ExplorerError(f"unknown system {name!r}: use hf-generate, ar or speculative:<draft>")


def load_prompts(path: Path = PROMPTS_FILE) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["prompts"]


def run(model: str = "default", systems=DEFAULT_SYSTEMS, repeats: int = 3, max_new_tokens: int = 64,
        temperature: float = 0.0, gamma: int = 4, controller: str = "fixed", quick: bool = False,
        progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)) -> dict:
    """Run the benchmark and return ``{"rows": [...], "meta": {...}}`` (rows as documented in the README)."""
    target = _load_cached(model, None, None)
    prompts = load_prompts()
    if quick:  # one prompt per category, short answers, two repeats
        seen, picked = set(), []
        for p in prompts:
            if p["category"] not in seen:
                seen.add(p["category"])
                picked.append(p)
        prompts, max_new_tokens, repeats = picked, min(max_new_tokens, 32), min(repeats, 2)
    chosen = [parse_system(s, gamma, controller) for s in systems]
    if not any(s.method == "ar" for s in chosen):
        chosen.insert(0, parse_system("ar", gamma, controller))  # every row is compared with our ar
    ids = [target.encode(p["text"]) for p in prompts]

    def once(system: System, prompt_ids: list[int], n: int):
        if system.method == "hf-generate":
            return _hf_generate(target, prompt_ids, n, temperature)
        start = time.perf_counter()
        trace = decode(target, prompt_ids=prompt_ids, method=system.method, draft=system.draft,
                       gamma=system.gamma or 4, controller=system.controller if system.draft else "fixed",
                       temperature=temperature, max_new_tokens=n, seed=0)
        return list(trace.output_ids), time.perf_counter() - start, trace

    for system in chosen:  # warm-up: first calls pay for allocations and lazy initialisation
        once(system, ids[0], 8)
    # results[system][repeat][prompt] = (output ids, seconds, trace or None)
    results = {s.name: [[None] * len(ids) for _ in range(repeats)] for s in chosen}
    total, done = repeats * len(ids) * len(chosen), 0
    for rep in range(repeats):
        for j, prompt_ids in enumerate(ids):
            for system in chosen[rep % len(chosen):] + chosen[: rep % len(chosen)]:
                out = once(system, prompt_ids, max_new_tokens)
                results[system.name][rep][j] = out
                done += 1
                progress(f"[{done}/{total}] {system.name} · {prompts[j]['category']} · "
                         f"{len(out[0])} tokens · {len(out[0]) / out[1]:.1f} tok/s")
    rows = [_row(s, results, prompts, temperature) for s in chosen]
    return {"rows": rows, "meta": {
        "model": model, "device": str(target.device), "dtype": str(target.dtype).replace("torch.", ""),
        "prompts": len(ids), "repeats": repeats, "max_new_tokens": max_new_tokens, "temperature": temperature,
        "gamma": gamma, "controller": controller, "torch_threads": torch.get_num_threads(), "quick": quick,
    }}


def _hf_generate(target, prompt_ids, n, temperature):
    x = torch.tensor([prompt_ids], device=target.device)
    kwargs = dict(do_sample=True, temperature=temperature, top_k=0) if temperature > 0 else dict(do_sample=False)
    start = time.perf_counter()
    with torch.inference_mode():
        out = target.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n,
                                    pad_token_id=min(target.eos_token_ids, default=0), **kwargs)
    if target.device.type == "cuda":
        torch.cuda.synchronize(target.device)
    return out[0, len(prompt_ids):].tolist(), time.perf_counter() - start, None


def _row(system: System, results, prompts, temperature) -> dict:
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
    tested = sum(t.summary.accepted + sum(r.event == "rejected" for r in t.rounds) for t in traces)
    forwards = sum(t.summary.target_forwards for t in traces)
    new = sum(t.summary.new_tokens for t in traces)
    cs = [t.summary.c_measured for t in traces if t.summary.c_measured is not None]
    gammas = [t.summary.mean_gamma for t in traces if t.summary.mean_gamma]
    c = statistics.median(cs) if cs else None
    alpha = accepted / tested if tested else None
    predicted = (float(theory.speedup(min(alpha, 1.0), statistics.mean(gammas), c))
                 if alpha is not None and c is not None and gammas else None)
    identical = None
    if temperature == 0:
        identical = all(runs[k][j][0] == ar_runs[k][j][0] for k in range(len(runs)) for j in range(len(runs[k])))
    categories = sorted({p["category"] for p in prompts})
    by_category = {cat: statistics.median(rate(rep, cat) for rep in runs) /
                   statistics.median(rate(rep, cat) for rep in ar_runs) for cat in categories}
    return {
        "system": system.name, "method": system.method, "draft": system.draft,
        "controller": system.controller if system.draft else None,
        "tokens_per_s": median, "tokens_per_s_min": min(rates), "tokens_per_s_max": max(rates),
        "speedup_vs_hf": median / hf_median if hf_median else None, "speedup_vs_ar": median / ar_median,
        "speedup_vs_ar_by_category": by_category,
        "acceptance_rate": accepted / drafted if drafted else None, "alpha_hat": alpha,
        "tokens_per_target_forward": new / forwards if forwards else None, "c": c,
        "predicted_speedup": predicted, "identical_to_ar": identical,
    }


def markdown(report: dict) -> str:
    """The rows as a markdown table."""
    def fmt(x, spec=".2f"):
        return "–" if x is None else (("yes" if x else "**no**") if isinstance(x, bool) else format(x, spec))

    lines = ["| system | tok/s median (min–max) | × HF generate | × our ar | acceptance | tok / target fwd "
             "| c | Thm 3.8 predicts | identical to ar |", "|" + "---|" * 9]
    for r in report["rows"]:
        lines.append(
            f"| {r['system']} | {r['tokens_per_s']:.1f} ({r['tokens_per_s_min']:.1f}–{r['tokens_per_s_max']:.1f}) "
            f"| {fmt(r['speedup_vs_hf'])} | {fmt(r['speedup_vs_ar'])} | {fmt(r['acceptance_rate'], '.0%')} "
            f"| {fmt(r['tokens_per_target_forward'])} | {fmt(r['c'])} | {fmt(r['predicted_speedup'])} "
            f"| {fmt(r['identical_to_ar'])} |")
    m = report["meta"]
    lines.append(f"\n{m['model']} on {m['device']} ({m['dtype']}, {m['torch_threads']} threads), {m['prompts']} prompts "
                 f"× {m['repeats']} repeats, {m['max_new_tokens']} new tokens, temperature {m['temperature']}, "
                 f"γ = {m['gamma']} ({m['controller']}).")
    return "\n".join(lines)
