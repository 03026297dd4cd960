"""Sweeps over a method's dials, each point measured against plain decoding (``ar``) in the same process: BiLD's
quality/cost trade-off over α_FB × α_RB (the BiLD paper's section 7.3.3, Figure 9), lenience (Leviathan et al. A.5,
their Table 5) and the theory lab (a synthetic draft over α × γ × c against Theorem 3.8). The beam search sweep is
``beam_sweep``.

For BiLD, each prompt's large-model greedy output (``ar``) is the reference; each grid point decodes every prompt
with ``bild`` and reports agreement and ROUGE-L against it, large-model forwards per token and tokens/s against
``ar``. ``pareto`` marks the points no other point beats on both quality (agreement) and cost (large forwards per
token). In every sweep each decode records the machine's pace, and a point's speed-up over ``ar`` that is not a
fact (timed at another pace; a lossless one above its tokens per target forward) is withheld with its reason
(``doubt``; ``explorer.ratios``).
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable

from .api import load_cached, decode, stream
from .errors import ExplorerError
from .limits import clip
from . import methods
from .bench import load_prompts
from .progress import left_after, print_progress
from .quality import compare, first_divergence, token_agreement
from .ratios import FLOOR_NOISE, curve_doubts, curve_words, impossible_speedup, pace_words

DEFAULT_FALLBACKS = (0.2, 0.4, 0.6, 0.8)
DEFAULT_ROLLBACKS = (1.0, 2.0, 3.0, 5.0, math.inf)


def bild_sweep(model: str = "default", draft: str = "early-exit:4", fallbacks=DEFAULT_FALLBACKS,
               rollbacks=DEFAULT_ROLLBACKS, max_new_tokens: int = 48, max_small_steps: int | None = None,
               prompts: list[str] | None = None,
               progress: Callable[[int, int, str], None] | None = None,
               should_stop: Callable[[], bool] | None = None) -> dict:
    """Run the grid; returns ``{"points": [...], "meta": {...}}`` with the Pareto front marked.
    ``max_small_steps`` None: BiLD's own default (its record's options).

    ``progress(done, total, line)`` is called after each grid point (default: the line on stderr);
    ``should_stop()`` before each decode (true: ``Stopped``)."""
    if max_small_steps is None:
        max_small_steps = methods.get("bild").make_options({}).max_small_steps
    progress = progress or print_progress
    target = load_cached(model, None, None)
    texts = prompts if prompts is not None else [p["text"] for p in load_prompts()]
    references, ar_seconds = [], 0.0
    for text in texts:
        start = time.perf_counter()
        references.append(paced(target, text, method="ar", max_new_tokens=max_new_tokens))
        ar_seconds += time.perf_counter() - start
    ar_rate = sum(len(r.output_ids) for r in references) / ar_seconds
    ar_pace = [x for r in references for x in r.pace_ms]
    grid = [(fb, rb) for rb in rollbacks for fb in fallbacks]
    points, started = [], time.perf_counter()
    for n, (fb, rb) in enumerate(grid, 1):
        scores, forwards, tokens, seconds, pace = [], 0, 0, 0.0, []
        for text, ref in zip(texts, references):
            check_stop(should_stop, n - 1, len(grid))
            start = time.perf_counter()
            trace = paced(target, text, method="bild", draft=draft, fallback_threshold=fb, rollback_threshold=rb,
                          max_small_steps=max_small_steps, max_new_tokens=max_new_tokens)
            seconds += time.perf_counter() - start
            pace += trace.pace_ms
            scores.append(compare(list(trace.output_ids), list(ref.output_ids)))
            forwards += trace.summary.target_forwards
            tokens += trace.summary.new_tokens
        point = {
            "fallback_threshold": fb, "rollback_threshold": None if math.isinf(rb) else rb,
            "agreement": statistics.mean(s["agreement"] for s in scores),
            "rouge_l": statistics.mean(s["rouge_l"] for s in scores),
            "large_forwards_per_token": forwards / tokens, "tokens_per_s": tokens / seconds,
            "speedup_vs_ar": tokens / seconds / ar_rate, "wall_s": seconds,
            "doubt": pace_words(pace, ar_pace, "this point's runs", "plain decoding"),  # lossy: no bound but the pace
        }
        points.append(point)
        progress(n, len(grid), f"[{n}/{len(grid)}] α_FB={fb} α_RB={rb}: agreement {point['agreement']:.2f}, "
                 f"{point['large_forwards_per_token']:.2f} large forwards/token, {times_ar(point)}"
                 f"{left_after(started, n, len(grid))}")
    for p in points:
        p["pareto"] = not any(_dominates(o, p) for o in points)
    return {"points": points, "meta": {"model": model, "draft": draft, "prompts": len(texts),
                                       "max_new_tokens": max_new_tokens, "max_small_steps": max_small_steps,
                                       "ar_tokens_per_s": ar_rate}}


def paced(target, text, **keywords):
    """One decode whose trace records the machine's pace (``explorer.pace``), for a speed-up against another."""
    return stream(target, text, **keywords).watch_pace().run()


def times_ar(point: dict) -> str:
    """A point's speed-up over ``ar`` for a progress line: the figure, or that it is withheld (``doubt``)."""
    return "× ar withheld (see the table)" if point.get("doubt") else f"{point['speedup_vs_ar']:.2f}× ar"


def ratio_cells(points, label: Callable[[dict], str]) -> tuple[list[str], list[str]]:
    """Each point's "× ar" cell (the figure, or "withheld (k)") and the numbered notes saying why (``doubt``), each
    note naming its point (``label``)."""
    cells, notes = [], []
    for p in points:
        if p.get("doubt"):
            notes.append(f"{len(notes) + 1}. {label(p)}: {p['doubt']}.")
            cells.append(f"withheld ({len(notes)})")
        else:
            cells.append(f"{p['speedup_vs_ar']:.2f}")
    return cells, (["", "Withheld, not printed as facts (a fair figure needs a quiet machine):", "", *notes] if notes else [])


def _dominates(a: dict, b: dict) -> bool:
    better_or_equal = a["agreement"] >= b["agreement"] and a["large_forwards_per_token"] <= b["large_forwards_per_token"]
    strictly = a["agreement"] > b["agreement"] or a["large_forwards_per_token"] < b["large_forwards_per_token"]
    return better_or_equal and strictly


def markdown(report: dict) -> str:
    lines = ["| α_FB | α_RB | agreement with large | ROUGE-L | large forwards / token | tok/s | × ar | Pareto |",
             "|" + "---|" * 8]
    cells, notes = ratio_cells(report["points"], lambda p: f"α_FB = {p['fallback_threshold']:g}, α_RB = "
                               + ("∞" if p["rollback_threshold"] is None else f"{p['rollback_threshold']:g}"))
    for p, cell in zip(report["points"], cells):
        rb = "∞" if p["rollback_threshold"] is None else f"{p['rollback_threshold']:g}"
        lines.append(f"| {p['fallback_threshold']:g} | {rb} | {p['agreement']:.2f} | {p['rouge_l']:.2f} "
                     f"| {p['large_forwards_per_token']:.2f} | {p['tokens_per_s']:.1f} | {cell} "
                     f"| {'★' if p['pareto'] else ''} |")
    lines += notes
    m = report["meta"]
    lines.append(f"\n{m['model']} with the small model {m['draft']}, {m['prompts']} prompts, {m['max_new_tokens']} "
                 f"new tokens, small turns capped at {m['max_small_steps']}; ar: {m['ar_tokens_per_s']:.1f} tok/s.")
    return "\n".join(lines)


DEFAULT_LENIENCES = (1.0, 0.5, 0.3, 0.1)  # Leviathan et al.'s Table 5


def lenience_sweep(model: str = "default", draft: str = "early-exit:4", leniences=DEFAULT_LENIENCES,
                   max_new_tokens: int = 48, temperature: float = 0.0, prompts: list[str] | None = None,
                   progress: Callable[[int, int, str], None] | None = None) -> dict:
    """Decode every prompt with ``lenient`` at each l (Leviathan et al. A.5, their Table 5): α̂, tokens per
    target forward, speed-up over ``ar`` measured in the same process, the share of accepts due to lenience,
    and what it changed — token agreement with the exact output and where it first differs (greedy: the
    target's own output; sampled: the l = 1 run with the same seed, identical until a lenient accept)."""
    progress = progress or print_progress
    target = load_cached(model, None, None)
    texts = prompts if prompts is not None else [p["text"] for p in load_prompts()]
    for method in ("ar", "lenient"):  # warm-up: first calls pay for allocations and lazy initialisation
        decode(target, texts[0], method=method, draft=None if method == "ar" else draft, max_new_tokens=8)
    references, ar_seconds = [], 0.0
    for text in texts:
        start = time.perf_counter()
        references.append(paced(target, text, method="ar", max_new_tokens=max_new_tokens, temperature=temperature))
        ar_seconds += time.perf_counter() - start
    ar_rate = sum(len(r.output_ids) for r in references) / ar_seconds
    ar_pace = [x for r in references for x in r.pace_ms]
    exact = references if temperature == 0 else [
        decode(target, text, method="lenient", draft=draft, lenience=1.0, max_new_tokens=max_new_tokens,
               temperature=temperature) for text in texts]
    points, started = [], time.perf_counter()
    for n, lenience in enumerate(leniences, 1):
        traces, seconds = [], 0.0
        for text in texts:
            start = time.perf_counter()
            traces.append(paced(target, text, method="lenient", draft=draft, lenience=lenience,
                                max_new_tokens=max_new_tokens, temperature=temperature))
            seconds += time.perf_counter() - start
        tokens = sum(t.summary.new_tokens for t in traces)
        accepted = sum(t.summary.accepted for t in traces)
        tested = sum(r.tested for t in traces for r in t.rounds)
        lenient = sum(len(r.detail.get("lenient_accepts", ())) for t in traces for r in t.rounds)
        pairs = [(list(t.output_ids), list(e.output_ids)) for t, e in zip(traces, exact)]
        diverged = [first_divergence(o, e) for o, e in pairs]
        point = {
            "lenience": lenience, "alpha_hat": accepted / tested if tested else None,
            "tokens_per_target_forward": tokens / sum(t.summary.target_forwards for t in traces),
            "lenient_share": lenient / accepted if accepted else 0.0,
            "agreement": statistics.mean(token_agreement(o, e) for o, e in pairs),
            "identical": sum(d is None for d in diverged),
            "first_divergence_median": statistics.median([d + 1 if d is not None else len(e) + 1
                                                          for d, (_, e) in zip(diverged, pairs)]),
            "tokens_per_s": tokens / seconds, "speedup_vs_ar": tokens / seconds / ar_rate, "wall_s": seconds,
        }
        point["doubt"] = (pace_words([x for t in traces for x in t.pace_ms], ar_pace, "this point's runs",
                                     "plain decoding")
                          or impossible_speedup(point["speedup_vs_ar"], point["tokens_per_target_forward"],
                                                lossy=lenience < 1))
        points.append(point)
        progress(n, len(leniences), f"[{n}/{len(leniences)}] l={lenience:g}: α̂ {point['alpha_hat'] or 0:.2f}, "
                 f"agreement {point['agreement']:.2f}, {times_ar(point)}{left_after(started, n, len(leniences))}")
    return {"points": points, "meta": {"model": model, "draft": draft, "prompts": len(texts),
                                       "max_new_tokens": max_new_tokens, "temperature": temperature,
                                       "ar_tokens_per_s": ar_rate}}


def lenience_markdown(report: dict) -> str:
    lines = ["| l | α̂ | tokens / target forward | accepts due to lenience | agreement with exact | identical runs "
             "| first difference (median token) | tok/s | × ar |", "|" + "---|" * 9]
    cells, notes = ratio_cells(report["points"], lambda p: f"l = {p['lenience']:g}")
    for p, cell in zip(report["points"], cells):
        lines.append(f"| {p['lenience']:g} | {p['alpha_hat'] or 0:.2f} | {p['tokens_per_target_forward']:.2f} "
                     f"| {p['lenient_share']:.0%} | {p['agreement']:.2f} | {p['identical']} "
                     f"| {p['first_divergence_median']:g} | {p['tokens_per_s']:.1f} | {cell} |")
    lines += notes
    m = report["meta"]
    lines.append(f"\n{m['model']} with {m['draft']}, {m['prompts']} prompts, {m['max_new_tokens']} new tokens, "
                 f"temperature {m['temperature']:g}; ar: {m['ar_tokens_per_s']:.1f} tok/s. A run that never differs "
                 "counts its length + 1 as its first difference.")
    return "\n".join(lines)


DEFAULT_LAB_ALPHAS = (0.6, 0.8, 0.9)
DEFAULT_LAB_GAMMAS = (1, 2, 4, 8)
DEFAULT_LAB_COSTS = (0.0, 0.2)
MAX_LAB_VALUES = 8  # per axis: 8 × 8 × 8 runs per prompt is already a long wait
MAX_LAB_TOKENS = 16_384  # tokens one lab may decode (grid × prompts × tokens): ≈ 5–10 minutes on a 2-core CPU


class Stopped(ExplorerError):
    """A sweep stopped on request (its page was closed) before its end."""


def check_stop(should_stop: Callable[[], bool] | None, done: int, total: int) -> None:
    """Raise ``Stopped`` when ``should_stop`` says so (checked before every decode of a sweep)."""
    if should_stop is not None and should_stop():
        raise Stopped(f"stopped after {done} of {total} points")


def lab_grid(alphas, gammas, costs) -> tuple[tuple[float, ...], tuple[int, ...], tuple[float, ...]]:
    """The theory lab's axes checked: α from 0 to 1, γ whole from 1 to ``MAX_GAMMA``, c from 0 to 2 (the
    synthetic draft's own ranges), 1 to ``MAX_LAB_VALUES`` values each; ``ExplorerError`` otherwise."""
    from .limits import MAX_GAMMA

    def axis(values, name, low, high, whole=False):
        values = tuple(values)
        if not 1 <= len(values) <= MAX_LAB_VALUES:
            raise ExplorerError(f"{name}: give between 1 and {MAX_LAB_VALUES} values")
        for v in values:
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not low <= v <= high or (whole and v != int(v)):
                kind = "whole numbers" if whole else "numbers"
                raise ExplorerError(f"{name}: {kind} from {low:g} to {high:g}, got {clip(v)}")
        return tuple(sorted(set(int(v) if whole else float(v) for v in values)))

    return axis(alphas, "α", 0, 1), axis(gammas, "γ", 1, MAX_GAMMA, whole=True), axis(costs, "c", 0, 2)


def theory_sweep(model: str = "default", alphas=DEFAULT_LAB_ALPHAS, gammas=DEFAULT_LAB_GAMMAS, costs=DEFAULT_LAB_COSTS,
                 max_new_tokens: int = 48, prompts: list[str] | None = None,
                 progress: Callable[[int, int, str], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> dict:
    """The theory lab (``synthetic``: a draft right with probability α, costing c target steps, fixed γ)
    over α × γ × c, against Leviathan et al.'s closed forms: tokens per round against eq. 1, and the
    speed-up over ``ar`` against Theorem 3.8 as written (verification costs one target step) and priced
    with this machine's measured T(γ+1)/T(1). Speeds come from the runs' own clocks (the rounds; not the
    synthetic draft's one-off greedy reference, which is decoded before the first round).

    No speed-up is reported as a fact that is not one (``explorer.ratios``): every decode records the machine's
    pace, and a point whose runs met another pace than plain decoding's, or that beats plain decoding by more than
    its tokens per target forward allow, carries ``doubt`` (why, in words) and is drawn and printed as withheld
    (the lab printed "× ar 33.10 at 6.40 tokens/round", #48); a T(n) curve that cannot be (T(n) < T(1) behind its
    running maximum, or more than n one-token forwards) prices no theory and says so (``meta["verify_cost_doubt"]``:
    it read T(n)/T(1) up to 19.39)."""
    from . import theory
    from .engine.costs import raw_cost_curve, verify_cost_curve

    progress = progress or print_progress
    texts = prompts if prompts is not None else [p["text"] for p in load_prompts()][:6]
    planned = len(alphas) * len(gammas) * len(costs) * len(texts) * max_new_tokens
    if planned > MAX_LAB_TOKENS:
        raise ExplorerError(f"the lab would decode {planned:,} tokens ({len(alphas)} α × {len(gammas)} γ × {len(costs)} "
                            f"c × {len(texts)} prompts × {max_new_tokens} tokens); at most {MAX_LAB_TOKENS:,}: fewer "
                            "values or tokens")
    target = load_cached(model, None, None)
    curve = verify_cost_curve(target, max_tokens=max(gammas) + 1)
    ratios = [t / curve[0] for t in curve]  # T(n)/T(1), n = 1, 2, …
    medians = raw_cost_curve(target, max_tokens=max(gammas) + 1) or curve
    curve_doubt = curve_doubts(medians, FLOOR_NOISE) | curve_doubts(curve)
    curve_said = curve_words(curve_doubt, [t / medians[0] for t in medians]) if curve_doubt else None

    decode(target, texts[0], method="ar", max_new_tokens=8)  # warm-up: first calls allocate
    references = [paced(target, text, method="ar", max_new_tokens=max_new_tokens) for text in texts]
    ar_rate = sum(r.summary.new_tokens for r in references) / sum(r.summary.wall_s for r in references)
    ar_pace = [s for r in references for s in r.pace_ms]
    grid = [(c, a, g) for c in costs for a in alphas for g in gammas]
    points, started = [], time.perf_counter()
    for n, (c, a, g) in enumerate(grid, 1):
        traces = []
        for text in texts:
            check_stop(should_stop, n - 1, len(grid))
            traces.append(paced(target, text, method="synthetic", synthetic_alpha=a, synthetic_cost=c, gamma=g,
                                controller="fixed", max_new_tokens=max_new_tokens))
        if any(t.output_ids != r.output_ids for t, r in zip(traces, references)):
            raise AssertionError("the synthetic draft changed the output: verification is not lossless")
        tokens = sum(t.summary.new_tokens for t in traces)
        seconds = sum(t.summary.wall_s for t in traces)
        accepted = sum(t.summary.accepted for t in traces)
        tested = sum(r.tested for t in traces for r in t.rounds)
        costs_measured = [t.summary.c_measured for t in traces if t.summary.c_measured is not None]
        alpha_hat = accepted / tested if tested else a
        c_hat = statistics.mean(costs_measured) if costs_measured else c
        speedup = tokens / seconds / ar_rate
        per_forward = tokens / max(1, sum(t.summary.target_forwards for t in traces))
        doubt = (pace_words([s for t in traces for s in t.pace_ms], ar_pace, "this point's runs", "plain decoding")
                 or impossible_speedup(speedup, per_forward, lossy=False))
        priced = (lambda alpha, cost: None) if curve_doubt else (
            lambda alpha, cost: float(theory.speedup_with_verify_cost(alpha, g, cost, ratios[g])))
        point = {
            "alpha": a, "gamma": g, "c": c, "alpha_hat": accepted / tested if tested else None,
            "c_measured": statistics.mean(costs_measured) if costs_measured else None,
            "tokens_per_round": tokens / sum(t.summary.rounds for t in traces),
            "expected_tokens_per_round": float(theory.expected_tokens(a, g)),
            "speedup_vs_ar": speedup, "tokens_per_target_forward": per_forward, "doubt": doubt,
            "predicted_speedup": float(theory.speedup(a, g, c)),
            "predicted_speedup_verify_cost": priced(a, c),
            # the same closed forms at what the run realised (α̂ of its few dozen tests, its measured c)
            "expected_tokens_at_alpha_hat": float(theory.expected_tokens(min(alpha_hat, 1.0), g)),
            "predicted_at_measured": priced(min(alpha_hat, 1.0), c_hat),
            "tokens_per_s": tokens / seconds, "wall_s": seconds,
        }
        points.append(point)
        measured = times_ar(point)
        priced_words = "" if curve_doubt else f", priced: {point['predicted_speedup_verify_cost']:.2f}"
        left = left_after(started, n, len(grid))
        progress(n, len(grid), f"[{n}/{len(grid)}] α={a:g} γ={g} c={c:g}: {point['tokens_per_round']:.2f} tokens/round "
                 f"(eq. 1: {point['expected_tokens_per_round']:.2f}), {measured} "
                 f"(Thm 3.8: {point['predicted_speedup']:.2f}{priced_words}){left}")
    return {"points": points, "meta": {"model": model, "prompts": len(texts), "max_new_tokens": max_new_tokens,
                                       "ar_tokens_per_s": ar_rate, "verify_cost_ratio": ratios,
                                       "verify_cost_median_s": list(medians), "verify_cost_doubt": curve_said,
                                       "t1_ms": curve[0] * 1e3}}


def theory_markdown(report: dict) -> str:
    """The lab as a table; a withheld speed-up (``doubt``) is "withheld (k)" with its reason in a numbered note, and
    theory priced by a T(n) curve that cannot be is "–" with the curve's reason."""
    def num(x):
        return "–" if x is None else f"{x:.2f}"

    lines = ["| α | γ | c | α̂ | c measured | tokens / round | eq. 1 | eq. 1 at α̂ | × ar | Thm 3.8 "
             "| priced by T(γ+1) | priced, at α̂ and measured c |", "|" + "---|" * 12]
    cells, notes = ratio_cells(report["points"], lambda p: f"α = {p['alpha']:g}, γ = {p['gamma']}, c = {p['c']:g}")
    for p, measured in zip(report["points"], cells):
        lines.append(f"| {p['alpha']:g} | {p['gamma']} | {p['c']:g} | {p['alpha_hat'] or 0:.2f} | {num(p['c_measured'])} "
                     f"| {p['tokens_per_round']:.2f} | {p['expected_tokens_per_round']:.2f} "
                     f"| {p['expected_tokens_at_alpha_hat']:.2f} | {measured} | {p['predicted_speedup']:.2f} "
                     f"| {num(p['predicted_speedup_verify_cost'])} | {num(p['predicted_at_measured'])} |")
    lines += notes
    m = report["meta"]
    if m.get("verify_cost_doubt"):
        cost = f"T(n)/T(1) not shown, nor the theory priced by it: {m['verify_cost_doubt']}"
    else:
        cost = "T(n)/T(1) for n = 1…9: " + ", ".join(f"{r:.2f}" for r in m["verify_cost_ratio"][:9])
    lines.append(f"\n{m['model']}, {m['prompts']} prompts, {m['max_new_tokens']} new tokens, greedy, fixed γ; ar: "
                 f"{m['ar_tokens_per_s']:.1f} tok/s; T(1) {m['t1_ms']:.1f} ms; {cost}.")
    return "\n".join(lines)
