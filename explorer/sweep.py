"""Sweeps: one runner for every method's sweep (``run``: the sweep a method's record declares, ``Method.sweeps``:
BiLD's α_FB × α_RB, lenience, beam search against Hugging Face's), and the theory lab (``theory_sweep``: a synthetic
draft over α × γ × c against Theorem 3.8; the closed forms' lab, no method's sweep).

The runner decodes each grid point on every prompt through the API, times it against its reference in the same
process (plain decoding, ``ar``, unless the method declares another baseline), and hands the method's functions the
decodes to word and mark (``methods.sweep_record``). In every sweep each decode records the machine's pace, and a
point's speed-up that is not a fact (timed at another pace; a lossless one above its tokens per target forward) is
withheld with its reason (``doubt``; ``explorer.ratios``).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

from .api import load_cached, decode, stream
from .errors import ExplorerError
from .limits import clip
from . import methods
from .bench import load_prompts
from .methods.sweep_record import Axis, Lab, Reference, Runs, ratio_cells, times_ar
from .progress import left_after, print_progress
from .ratios import FLOOR_NOISE, curve_doubts, curve_words, impossible_speedup, pace_words


def run(name: str, model: str = "default", draft: str = "early-exit:4", values: dict | None = None,
        settings: dict | None = None, max_new_tokens: int = 48, prompts: list[str] | None = None,
        progress: Callable[[int, int, str], None] | None = None,
        should_stop: Callable[[], bool] | None = None) -> dict:
    """Run the method's sweep called ``name`` (``methods.sweeps()``); returns ``{"points": [...], "meta": {...}}``.

    ``values``: each axis's values by name (its defaults where not given), ``settings`` the values it holds fixed
    (a ``None`` one: the method's own option). Every system is warmed up once, then each group of points is timed
    against its reference (plain decoding, or the method's baseline) on every prompt, each decode recording the
    machine's pace for the honesty rule. ``progress(done, total, line)`` is called after each row (default: the
    line on stderr); ``should_stop()`` before each decode (true: ``Stopped``)."""
    found = methods.sweeps()
    if name not in found:
        raise ExplorerError(f"unknown sweep {clip(name, 40)}: use one of {', '.join(found)} or theory")
    method, plan = found[name]
    values = {axis.name: axis.check((values or {}).get(axis.name, axis.default), axis.name) for axis in plan.axes}
    fixed = {s.name: (settings or {}).get(s.name, s.default) for s in plan.settings}
    fixed = {k: getattr(method.make_options({}), k) if v is None else v for k, v in fixed.items()}
    everywhere = {s.name: fixed[s.name] for s in plan.settings if s.everywhere}
    progress = progress or print_progress
    target = load_cached(model, None, None)
    texts = prompts if prompts is not None else [p["text"] for p in load_prompts()]

    def decoded(text, **options):
        return decode(target, text, **{"method": method.name, "draft": draft, "max_new_tokens": max_new_tokens,
                                       **everywhere, **options})

    lab = Lab(target, texts, [list(target.encode(t)) for t in texts], draft, max_new_tokens, decoded)
    grid = plan.grid(values)
    if plan.baseline is None:  # warm-up: first calls pay for allocations and lazy initialisation
        decode(target, texts[0], method="ar", max_new_tokens=8, **everywhere)
    else:
        plan.baseline.warm(lab)
    decoded(texts[0], **{**plan.options(grid[0], fixed), "max_new_tokens": 8})
    groups: dict = {}
    for point in grid:
        groups.setdefault(plan.group(point), []).append(point)
    total = len(grid) + (len(groups) if plan.baseline is not None else 0)
    points, reference, started = [], None, time.perf_counter()

    def told(row):
        points.append(row)
        progress(len(points), total, f"[{len(points)}/{total}] {plan.words(row, lab)}"
                 f"{left_after(started, len(points), total)}")

    for group, members in groups.items():
        check_stop(should_stop, len(points), total)
        reference = plain_reference(target, texts, max_new_tokens, everywhere) if plan.baseline is None \
            else plan.baseline.run(lab, group)
        if reference.row is not None:
            told(reference.row)
        against = (plan.exact(lab, fixed, reference) if plan.exact else None) or reference.outputs
        for point in members:
            traces, seconds, pace = [], 0.0, []
            for text in texts:
                check_stop(should_stop, len(points), total)
                start = time.perf_counter()
                traces.append(paced(target, text, **{"method": method.name, "draft": draft,
                                                     "max_new_tokens": max_new_tokens, **everywhere,
                                                     **plan.options(point, fixed)}))
                seconds += time.perf_counter() - start
                pace += traces[-1].pace_ms
            told(plan.row(point, Runs(traces, seconds, pace, reference, against, lab)))
    if plan.finish is not None:
        plan.finish(points)
    return {"points": points, "meta": {"model": model, "draft": draft, "prompts": len(texts),
                                       "max_new_tokens": max_new_tokens, **fixed, **reference.meta}}


def plain_reference(target, texts: list[str], max_new_tokens: int, keywords: dict) -> Reference:
    """Plain decoding (``ar``) of every prompt, each timed around the whole decode and paced: what a sweep's
    points are timed against unless their method declares another baseline."""
    outputs, seconds, pace = [], 0.0, []
    for text in texts:
        start = time.perf_counter()
        trace = paced(target, text, method="ar", max_new_tokens=max_new_tokens, **keywords)
        seconds += time.perf_counter() - start
        outputs.append(list(trace.output_ids))
        pace += trace.pace_ms
    rate = sum(map(len, outputs)) / seconds
    return Reference("plain decoding", outputs, rate, pace, meta={"ar_tokens_per_s": rate})


def table(name: str, report: dict) -> str:
    """A report of the method's sweep called ``name`` as markdown (its method's ``Sweep.table``)."""
    found = methods.sweeps()
    if name not in found:
        raise ExplorerError(f"unknown sweep {clip(name, 40)}: use one of {', '.join(found)}")
    return found[name][1].table(report)


def paced(target, text, **keywords):
    """One decode whose trace records the machine's pace (``explorer.pace``), for a speed-up against another."""
    return stream(target, text, **keywords).watch_pace().run()


DEFAULT_LAB_ALPHAS = (0.6, 0.8, 0.9)
DEFAULT_LAB_GAMMAS = (1, 2, 4, 8)
DEFAULT_LAB_COSTS = (0.0, 0.2)
THEORY_AXES = (Axis("alphas", "alpha", DEFAULT_LAB_ALPHAS, "theory: the synthetic draft's α values"),
               Axis("gammas", "gamma", DEFAULT_LAB_GAMMAS, "theory: γ values (whole numbers)"),
               Axis("costs", "cost", DEFAULT_LAB_COSTS, "theory: the synthetic draft's c values (× T(1))"))
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
