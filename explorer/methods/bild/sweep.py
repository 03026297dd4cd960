"""BiLD's quality/cost trade-off over α_FB × α_RB (the BiLD paper's section 7.3.3, Figure 9), as a sweep the runner
(``explorer.sweep.run``) decodes: each prompt's large-model greedy output (``ar``) is the reference; each grid point
decodes every prompt with ``bild`` and reports agreement and ROUGE-L against it, large-model forwards per token and
tokens/s against ``ar``. ``pareto`` marks the points no other point beats on both quality (agreement) and cost (large
forwards per token). BiLD is lossy: a speed-up is withheld only when the machine's pace moved (``doubt``).
"""

from __future__ import annotations

import math
import statistics

from ...quality import compare
from ...ratios import pace_words
from ..sweep_record import Axis, Lab, Runs, Setting, Sweep, ratio_cells, times_ar

DEFAULT_FALLBACKS = (0.2, 0.4, 0.6, 0.8)
DEFAULT_ROLLBACKS = (1.0, 2.0, 3.0, 5.0, math.inf)


def grid(values: dict) -> list[dict]:
    """α_FB varies fastest: one curve per α_RB."""
    return [{"fallback": fb, "rollback": rb} for rb in values["rollbacks"] for fb in values["fallbacks"]]


def options(point: dict, settings: dict) -> dict:
    return {"fallback_threshold": point["fallback"], "rollback_threshold": point["rollback"],
            "max_small_steps": settings["max_small_steps"]}


def row(point: dict, runs: Runs) -> dict:
    scores = [compare(list(t.output_ids), list(ref)) for t, ref in zip(runs.traces, runs.against)]
    tokens = sum(t.summary.new_tokens for t in runs.traces)
    forwards = sum(t.summary.target_forwards for t in runs.traces)
    rb = point["rollback"]
    return {
        "fallback_threshold": point["fallback"], "rollback_threshold": None if math.isinf(rb) else rb,
        "agreement": statistics.mean(s["agreement"] for s in scores),
        "rouge_l": statistics.mean(s["rouge_l"] for s in scores),
        "large_forwards_per_token": forwards / tokens, "tokens_per_s": tokens / runs.seconds,
        "speedup_vs_ar": tokens / runs.seconds / runs.reference.tokens_per_s, "wall_s": runs.seconds,
        # lossy: no bound but the pace
        "doubt": pace_words(runs.pace, runs.reference.pace, "this point's runs", runs.reference.name),
    }


def _rollback(p: dict) -> str:
    return "∞" if p["rollback_threshold"] is None else f"{p['rollback_threshold']:g}"


def words(p: dict, lab: Lab) -> str:
    rb = "inf" if p["rollback_threshold"] is None else p["rollback_threshold"]
    return (f"α_FB={p['fallback_threshold']} α_RB={rb}: agreement {p['agreement']:.2f}, "
            f"{p['large_forwards_per_token']:.2f} large forwards/token, {times_ar(p)}")


def mark_pareto(points: list[dict]) -> None:
    for p in points:
        p["pareto"] = not any(_dominates(o, p) for o in points)


def _dominates(a: dict, b: dict) -> bool:
    better_or_equal = a["agreement"] >= b["agreement"] and a["large_forwards_per_token"] <= b["large_forwards_per_token"]
    strictly = a["agreement"] > b["agreement"] or a["large_forwards_per_token"] < b["large_forwards_per_token"]
    return better_or_equal and strictly


def table(report: dict) -> str:
    lines = ["| α_FB | α_RB | agreement with large | ROUGE-L | large forwards / token | tok/s | × ar | Pareto |",
             "|" + "---|" * 8]
    cells, notes = ratio_cells(report["points"], lambda p: f"α_FB = {p['fallback_threshold']:g}, α_RB = {_rollback(p)}")
    for p, cell in zip(report["points"], cells):
        lines.append(f"| {p['fallback_threshold']:g} | {_rollback(p)} | {p['agreement']:.2f} | {p['rouge_l']:.2f} "
                     f"| {p['large_forwards_per_token']:.2f} | {p['tokens_per_s']:.1f} | {cell} "
                     f"| {'★' if p['pareto'] else ''} |")
    lines += notes
    m = report["meta"]
    lines.append(f"\n{m['model']} with the small model {m['draft']}, {m['prompts']} prompts, {m['max_new_tokens']} "
                 f"new tokens, small turns capped at {m['max_small_steps']}; ar: {m['ar_tokens_per_s']:.1f} tok/s.")
    return "\n".join(lines)


SWEEP = Sweep(
    name="bild", help="BiLD's thresholds: quality against cost (the BiLD paper's Figure 9)",
    axes=(Axis("fallbacks", "fallback", DEFAULT_FALLBACKS, "bild: α_FB values, comma-separated"),
          Axis("rollbacks", "rollback", DEFAULT_ROLLBACKS, "bild: α_RB values, comma-separated (inf: none)")),
    settings=(Setting("max_small_steps", int, "bild: the cap on one small-model turn (default: bild's)"),),
    grid=grid, options=options, row=row, words=words, table=table, finish=mark_pareto,
)
