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

from . import machine, methods, theory
from .api import load_cached, decode
from .engine import fast
from .engine.controllers import DEFAULT_CONTROLLER, DEFAULT_GAMMA
from .engine.costs import raw_cost_curve, verify_cost_curve
from .trace import acceptance_by_position, alpha_hat
from .errors import ExplorerError
from .limits import clip
from .methods.eesd.exits import exit_for
from .models import quiet_transformers
from .pace import probe_ms
from .progress import print_progress, time_left
from .quality import token_agreement
from .ratios import FLOOR_NOISE, curve_doubts, curve_words
from .reports import row_doubt
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


PHASES = ("draft", "verify", "other")  # a round's clocks (``Timing``): a row's ms_per_token has one value each
HF_SYSTEMS = "hf-generate, hf-assisted:prompt-lookup:n, hf-assisted:early-exit:N[@γ], hf-beam:<k>"


def system_grammar() -> str:
    """Every system name the benchmark takes: Hugging Face's, then each method's from its registry record (so
    ``bench --help`` and the refusal of a bad name cannot fall behind a new method)."""
    return f"{HF_SYSTEMS} or one of the explorer's: {methods.system_syntax()}"


def parse_system(name: str, gamma: int, controller: str) -> System:
    if name == "hf-generate":
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
    if system.method.startswith("hf-"):
        raise ExplorerError(f"{system.name} is Hugging Face's own decoding, not the explorer's")
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
    ids = [target.encode(p["text"]) for p in prompts]

    assistants = {s.name: _hf_assistant_kwargs(target, s) for s in chosen if s.method == "hf-assisted"}

    def once(system: System, prompt_ids: list[int], n: int, session: str = "bench:warm-up"):
        if system.method == "hf-beam":
            out, seconds = hf_beam_search(target, prompt_ids, dict(system.options)["beam_width"], n)
            return out, seconds, None
        if system.method.startswith("hf-"):
            return _hf_generate(target, prompt_ids, n, temperature, **assistants.get(system.name, {}))
        start = time.perf_counter()
        # a session per repeat: a method that learns from earlier outputs (suffix) sees the other prompts'
        # answers of this repeat, never this prompt's own from an earlier repeat or the warm-up
        trace = decode(target, prompt_ids=prompt_ids, temperature=temperature, max_new_tokens=n, seed=0,
                       session=session, **decode_keywords(system))
        return list(trace.output_ids), time.perf_counter() - start, trace

    total, done = repeats * len(ids) * len(chosen), 0
    started = time.perf_counter()
    warm_tokens = 0
    for system in chosen:  # warm-up: first calls pay for allocations and lazy initialisation
        warm_tokens += len(once(system, ids[0], 8)[0])
    # what the whole run will take, from this machine's pace in the warm-up (its first calls included: an upper
    # guess, corrected after every run below)
    guess = (time.perf_counter() - started) / max(1, warm_tokens) * total * max_new_tokens
    progress(0, total, f"{plural(total, 'run')} of up to {max_new_tokens} tokens: {time_left(guess)} at the pace "
             "of the warm-up")
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
                left = (time.perf_counter() - started) / done * (total - done)
                progress(done, total, f"[{done}/{total}] {system.name} · {prompts[j]['category']} · "
                         f"{len(out[0])} tokens · {len(out[0]) / out[1]:.1f} tok/s"
                         + (f" · {time_left(left)}" if done < total else ""))
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


def _identical(row: dict) -> str:
    """"yes", or "**no**" with the share of plain decoding's tokens a lossy system kept ("**no** (88 % of
    tokens)"), – where not measured (sampling)."""
    same, kept = row.get("identical_to_ar"), row.get("agreement_with_ar")
    if same is None:
        return "–"
    return "yes" if same else "**no**" + (f" ({kept:.0%} of tokens)" if kept is not None else "")


def _phases(ms: dict | None) -> str:
    """A token's milliseconds drafting · verifying · on the rest ("7.4 · 37.0 · 1.0"), – without traces."""
    if not ms or any(ms.get(part) is None for part in PHASES):
        return "–"
    return " · ".join(f"{ms[part]:.1f}" for part in PHASES)


def _positions(rates) -> str:
    """The first eight positions' acceptance as percentages ("54 40 33 %"), – where untested."""
    if not rates:
        return "–"
    shown = " ".join("–" if x is None else f"{100 * x:.0f}" for x in rates[:8])
    return f"{shown}{' …' if len(rates) > 8 else ''} %"


def _hf_assistant_kwargs(target, system: System) -> dict:
    """Hugging Face's own assisted generation with the same draft as ours (constant γ)."""
    kind, _, arg = system.draft.partition(":")
    if kind == "prompt-lookup":
        return {"prompt_lookup_num_tokens": system.gamma, "max_matching_ngram_size": int(arg)}
    return {"assistant_model": early_exit_assistant(target.model, int(arg)),
            "num_assistant_tokens": system.gamma, "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": 0.0}


def early_exit_assistant(model: torch.nn.Module, n_layers: int) -> torch.nn.Module:
    """A model object made of the target's own embedding, first N layers, the same trained exit layers
    and norm as our ``early-exit:N`` when one ships (else the model's norm), and the full LM head
    (shared tensors, the target untouched): what HF's ``assistant_model`` needs. HF runs it with its
    own cache (no sharing with the target) and over the whole vocabulary."""
    import copy

    head = exit_for(model, n_layers)
    layers = list(model.model.layers[:n_layers])
    for index, layer in enumerate(head.layers):
        # shallow copies share the weights; only the attention's cache index differs (HF's cache is one
        # list of layers), and the submodule table is copied so the original keeps its own attention
        exit_layer = copy.copy(layer)
        exit_layer._modules = dict(layer._modules)
        attention = copy.copy(layer.self_attn)
        attention.layer_idx = n_layers + index
        exit_layer.self_attn = attention
        layers.append(exit_layer)
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = len(layers)
    if getattr(config, "layer_types", None):
        config.layer_types = config.layer_types[:len(layers)]
    with torch.device("meta"):
        assistant = type(model)(config)
    assistant.model.embed_tokens = model.model.embed_tokens
    assistant.model.layers = torch.nn.ModuleList(layers)
    assistant.model.norm = head.norm
    assistant.model.rotary_emb = model.model.rotary_emb
    assistant.lm_head = model.lm_head
    assistant.generation_config = copy.deepcopy(model.generation_config)
    return assistant.eval()


def hf_beam_search(target, prompt_ids: list[int], width: int, max_new_tokens: int) -> tuple[list[int], float]:
    """Hugging Face's beam search on the target (``generate(num_beams=k, do_sample=False)``, length penalty
    1, ``early_stopping=False``): the best beam's new tokens (to its end-of-sequence token) and seconds."""
    x = torch.tensor([prompt_ids], device=target.device)
    start = time.perf_counter()
    with torch.inference_mode():
        out = target.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens, num_beams=width,
                                    do_sample=False, length_penalty=1.0, early_stopping=False,
                                    pad_token_id=min(target.eos_token_ids, default=0))
    seconds = time.perf_counter() - start
    ids = out[0, len(prompt_ids):].tolist()
    end = next((i for i, t in enumerate(ids) if t in target.eos_token_ids), None)
    return (ids if end is None else ids[: end + 1]), seconds


def _hf_generate(target, prompt_ids, n, temperature, **assist):
    x = torch.tensor([prompt_ids], device=target.device)
    kwargs = dict(do_sample=True, temperature=temperature, top_k=0) if temperature > 0 else dict(do_sample=False)
    start = time.perf_counter()
    with torch.inference_mode():
        out = target.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n,
                                    pad_token_id=min(target.eos_token_ids, default=0), **kwargs, **assist)
    if target.device.type == "cuda":
        torch.cuda.synchronize(target.device)
    return out[0, len(prompt_ids):].tolist(), time.perf_counter() - start, None


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
        "lossy": bool(settings.lossy) if settings is not None else False,  # Hugging Face's: greedy, or exact
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


def markdown(report: dict, text: Callable[[object], str] | None = None) -> str:
    """The rows as a markdown table. Every row has ``system``, ``tokens_per_s`` and ``speedup_vs_ar``;
    anything else may be absent (shown as –). ``text`` writes the report's strings (names, categories,
    the meta); by default each stays within its cell (no line break, pipes escaped); a page showing a
    stranger's report passes ``viz.safe_markdown``."""
    text = text or (lambda value: " ".join(str(value).split()).replace("|", "\\|"))

    def fmt(x, spec=".2f"):
        return "–" if x is None else (("yes" if x else "**no**") if isinstance(x, bool) else format(x, spec))

    rows = report["rows"]
    by_name = {r["system"]: r for r in rows}
    notes: list[str] = []

    def ratio(row: dict, key: str, baseline: str) -> str:
        """A speed-up cell: the figure, or "withheld" with a numbered note saying why (``reports.row_doubt``)."""
        why = row_doubt(row, by_name.get(baseline), key)
        if why is None:
            return fmt(row.get(key))
        notes.append(f"{len(notes) + 1}. {text(row['system'])} × {text(baseline)}: {why}.")
        return f"withheld ({len(notes)})"

    m = report.get("meta") or {}
    medians = m.get("verify_cost_median_s")
    curve_doubt = curve_doubts(medians, FLOOR_NOISE) if isinstance(medians, list) else {}

    lines = ["| system | tok/s median (min–max) | × HF generate | × our ar | worst category × ar | acceptance "
             "| accepted by draft position 1, 2, … | tok / target fwd | c | ms / token: draft · verify · rest "
             "| Leviathan Thm 3.8 | Leviathan Thm 3.8 with T(k) | identical to ar | peak RSS MB |",
             "|" + "---|" * 14]
    for r in rows:
        categories = r.get("speedup_vs_ar_by_category") or {}
        worst = min(categories.items(), key=lambda kv: kv[1], default=None)
        lowest, highest = r.get("tokens_per_s_min"), r.get("tokens_per_s_max")
        spread = f" ({lowest:.1f}–{highest:.1f})" if lowest is not None and highest is not None else ""
        against_ar = ratio(r, "speedup_vs_ar", "ar")
        worst_cell = f"{worst[1]:.2f} ({text(worst[0])})" if worst and not against_ar.startswith("withheld") else "–"
        lines.append(
            f"| {text(r['system'])} | {r['tokens_per_s']:.1f}{spread} | {ratio(r, 'speedup_vs_hf', 'hf-generate')} "
            f"| {against_ar} "
            f"| {worst_cell} | {fmt(r.get('acceptance_rate'), '.0%')} "
            f"| {_positions(r.get('acceptance_by_position'))} | {fmt(r.get('tokens_per_target_forward'))} | {fmt(r.get('c'))} "
            f"| {_phases(r.get('ms_per_token'))} | {fmt(r.get('predicted_speedup'))} "
            f"| {'–' if curve_doubt else fmt(r.get('predicted_speedup_verify_cost'))} | {_identical(r)} "
            f"| {fmt(r.get('peak_rss_mb'), '.0f')} |")
    if notes:
        lines.append("\nWithheld, not printed as facts (a fair figure needs a quiet machine, or more repeats):\n\n"
                     + "\n".join(notes))
    ratios = m.get("verify_cost_ratio")
    if ratios and curve_doubt:
        lines.append(f"\nMeasured verify cost T(n)/T(1) not shown (nor Theorem 3.8 priced by it): "
                     f"{curve_words(curve_doubt, [t / medians[0] for t in medians])}.")
    elif ratios:
        lines.append(f"\nMeasured verify cost T(n)/T(1) for n = 1…{len(ratios)}: "
                     + ", ".join(f"{x:.2f}" for x in ratios))
    if m:
        def part(template: str, *keys: str) -> str | None:
            """``template`` filled with the meta's values, or None when one is missing (a race or "your
            runs" report has fewer of them than a benchmark's): a missing value is left out, never a "?"."""
            if any(m.get(key) is None for key in keys):
                return None
            return template.format(*(text(m[key]) for key in keys))

        where = part("{} on {}", "model", "device") or part("{}", "model")
        how = ", ".join(x for x in (part("{}", "dtype"), part("{} threads", "torch_threads")) if x)
        parts = [(where or "") + (f" ({how})" if how else ""),
                 part(f"{plural(m.get('prompts') or 0, 'prompt')} × {plural(m.get('repeats') or 0, 'repeat')}",
                      "prompts", "repeats"), part("{} new tokens", "max_new_tokens"),
                 part("temperature {}", "temperature"), part("γ = {} ({})", "gamma", "controller")]
        parts.insert(0, part("measured {}", "date"))
        parts.insert(2, {"heldout": "held-out prompts", "shipped": "the shipped prompts"}.get(m.get("prompt_set")))
        shown = ", ".join(x for x in parts if x)
        if shown:
            lines.append("\n" + shown + {True: "; our decoding on the CPU fast path.",
                                          False: "; CPU fast path off."}.get(m.get("fast_path"), "."))
        where = machine_words(m)
        if where:
            lines.append("\n" + text(where))
    return "\n".join(lines)


def machine_words(meta: dict) -> str | None:
    """The machine a report (its checked ``meta``) was measured on, and how it ran the model, in a sentence;
    None for a report that does not say (one from before the record)."""
    record = meta.get("machine")
    if not isinstance(record, dict):
        return None
    said = f"Measured on {machine.words(record)}"
    kinds = (meta.get("kernels") or {}).get("kinds") if isinstance(meta.get("kernels"), dict) else None
    if isinstance(kinds, dict) and kinds:
        said += "; kernels " + ", ".join(f"{bucket.replace('-', '–')} {'row' if bucket == '1' else 'rows'}: {kind}"
                                         for bucket, kind in kinds.items())
    if meta.get("compiled"):
        said += f"; decoder layer {meta['compiled']}"
    return said + "."
