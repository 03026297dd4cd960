"""Lenience as a sweep (Leviathan et al. A.5, their Table 5), decoded by the runner (``explorer.sweep.run``): every
prompt with ``lenient`` at each l: α̂, tokens per target forward, speed-up over ``ar`` measured in the same process,
the share of accepts due to lenience, and what it changed — token agreement with the exact output and where it first
differs (greedy: the target's own output; sampled: the l = 1 run with the same seed, identical until a lenient
accept). A speed-up is withheld when the pace moved, or when exact lenience (l = 1) beats plain decoding by more than
its tokens per target forward allow (``explorer.ratios``).
"""

from __future__ import annotations

import statistics

from ...quality import first_divergence, token_agreement
from ...ratios import impossible_speedup, pace_words
from ..sweep_record import Axis, Lab, Reference, Runs, Setting, Sweep, ratio_cells, times_ar

DEFAULT_LENIENCES = (1.0, 0.5, 0.3, 0.1)  # Leviathan et al.'s Table 5


def grid(values: dict) -> list[dict]:
    return [{"lenience": lenience} for lenience in values["leniences"]]


def options(point: dict, settings: dict) -> dict:
    return {"lenience": point["lenience"]}


def exact(lab: Lab, settings: dict, reference: Reference) -> list[list[int]] | None:
    """Greedy: the target's own output (the reference); sampled: the exact rule (l = 1) with the same seed."""
    if settings["temperature"] == 0:
        return None
    return [list(lab.decode(text, lenience=1.0).output_ids) for text in lab.texts]


def row(point: dict, runs: Runs) -> dict:
    traces, lenience = runs.traces, point["lenience"]
    tokens = sum(t.summary.new_tokens for t in traces)
    accepted = sum(t.summary.accepted for t in traces)
    tested = sum(r.tested for t in traces for r in t.rounds)
    lenient = sum(len(r.detail.get("lenient_accepts", ())) for t in traces for r in t.rounds)
    pairs = [(list(t.output_ids), list(e)) for t, e in zip(traces, runs.against)]
    diverged = [first_divergence(o, e) for o, e in pairs]
    point = {
        "lenience": lenience, "alpha_hat": accepted / tested if tested else None,
        "tokens_per_target_forward": tokens / sum(t.summary.target_forwards for t in traces),
        "lenient_share": lenient / accepted if accepted else 0.0,
        "agreement": statistics.mean(token_agreement(o, e) for o, e in pairs),
        "identical": sum(d is None for d in diverged),
        "first_divergence_median": statistics.median([d + 1 if d is not None else len(e) + 1
                                                      for d, (_, e) in zip(diverged, pairs)]),
        "tokens_per_s": tokens / runs.seconds, "speedup_vs_ar": tokens / runs.seconds / runs.reference.tokens_per_s,
        "wall_s": runs.seconds,
    }
    point["doubt"] = (pace_words(runs.pace, runs.reference.pace, "this point's runs", runs.reference.name)
                      or impossible_speedup(point["speedup_vs_ar"], point["tokens_per_target_forward"],
                                            lossy=lenience < 1))
    return point


def words(p: dict, lab: Lab) -> str:
    return f"l={p['lenience']:g}: α̂ {p['alpha_hat'] or 0:.2f}, agreement {p['agreement']:.2f}, {times_ar(p)}"


def table(report: dict) -> str:
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


SWEEP = Sweep(
    name="lenience", help="lenience l: what accepting more changes (Leviathan et al.'s Table 5)",
    axes=(Axis("leniences", "lenience", DEFAULT_LENIENCES, "lenience: l values, comma-separated"),),
    settings=(Setting("temperature", float, "lenience: 0 = greedy", default=0.0, everywhere=True),),
    grid=grid, options=options, row=row, words=words, table=table, exact=exact,
)
