"""A benchmark report (``bench.run``'s, a race's, "your runs'", a stranger's upload) as a markdown table: each
system's speed and speed-ups, acceptance, where a token's time goes, Theorem 3.8, and the machine it was measured
on. A speed-up that is not a fact (``reports.row_doubt``: timed at another pace than its baseline, or faster than a
lossless row's tokens per target forward allow) is "withheld (k)" with a numbered note saying why, and a verify-cost
curve whose medians put T(n) below T(1) is not shown (``explorer.ratios``).
"""

from __future__ import annotations

from typing import Callable

from . import machine
from .ratios import FLOOR_NOISE, curve_doubts, curve_words
from .reports import row_doubt
from .words import plural

PHASES = ("draft", "verify", "other")  # a round's clocks (``Timing``): a row's ms_per_token has one value each


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
