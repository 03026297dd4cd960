"""Benchmark reports as the Compare view and ``whatif`` read them: every value checked, nothing trusted.

``python -m explorer bench`` (and the race, and "your runs") write a report; the page shows one that a
stranger may have uploaded, and ``python -m explorer whatif`` reads one. No gradio here, so the CLI can
check a report without the page.
"""

from __future__ import annotations

from .errors import ExplorerError
from .ratios import impossible_speedup, pace_words
from .limits import MAX_JSON_DEPTH, MAX_NAME_CHARS, MAX_REPORT_BYTES, MAX_REPORT_ROWS, MAX_SPEC_CHARS
from .untrusted import BOOL, FINITE, Kind, ListOf, MapOf, Maybe, Record, Refused, check_plain, number, parse, text, whole

# What the Compare view reads from a benchmark report (``bench.run`` writes it). Every row has its system,
# tokens/s and speed-up over our ar; anything else may be absent or null (an older report, a system
# without drafts); any other key is kept but must be plain JSON. Reports are shared: nothing is trusted.
AMOUNT = Maybe(number(0, 1e12))  # a speed, ratio, cost or size: finite and short when printed
POSITIVE = Kind("a positive number", lambda v: FINITE.ok(v) and 0 < v <= 1e12)
RATE = Maybe(number(0, 1, "a number from 0 to 1"))
COUNT = Maybe(whole(0, 2**31 - 1))
NAME = Maybe(text(MAX_NAME_CHARS))
ROW = Record({
    "system": text(MAX_SPEC_CHARS), "method": NAME, "draft": NAME, "controller": NAME, "tokens_per_s": POSITIVE,
    "tokens_per_s_min": AMOUNT, "tokens_per_s_max": AMOUNT, "speedup_vs_hf": Maybe(POSITIVE), "speedup_vs_ar": POSITIVE,
    "speedup_vs_ar_by_category": Maybe(MapOf(text(64), number(0, 1e12), 64, "an object from categories to speed-ups")),
    "acceptance_rate": RATE, "alpha_hat": RATE,
    "acceptance_by_position": Maybe(ListOf(RATE, 64, "a list of at most 64 acceptance rates")), "tokens_per_target_forward": AMOUNT, "c": AMOUNT,
    "predicted_speedup": AMOUNT, "predicted_speedup_verify_cost": AMOUNT, "identical_to_ar": Maybe(BOOL),
    "agreement_with_ar": RATE, "peak_rss_mb": AMOUNT, "lossy": Maybe(BOOL),
    "pace_ms": Maybe(ListOf(number(0, 1e6), 4096, "a list of at most 4096 probe times")),
    "ms_per_token": Maybe(Record({"draft": AMOUNT, "verify": AMOUNT, "other": AMOUNT}, (), strict=True,
                                 words="an object of draft, verify and other milliseconds")),
}, ("system", "tokens_per_s", "speedup_vs_ar"), strict=False, words="an object (one system's row)")
# the machine a report was measured on (``explorer.machine.describe``) and how it ran the model
MACHINE = Record({"cpu": NAME, "cores": COUNT, "l2": NAME, "l3": NAME, "torch": NAME, "threads": COUNT,
                  "units": Maybe(ListOf(text(MAX_NAME_CHARS), 8, "a list of at most 8 names"))},
                 strict=False, words="an object (the machine)")
KERNELS = Record({"kinds": Maybe(MapOf(text(16), text(MAX_NAME_CHARS), 8, "an object from row buckets to kernels")),
                  "how": NAME}, strict=False, words="an object (the kernel choice)")
META = Record({
    "verify_cost_ratio": Maybe(ListOf(number(0, 1e12), 1024, "a list of at most 1024 cost ratios")), "model": NAME,
    "device": NAME, "dtype": NAME, "prompts": COUNT, "repeats": COUNT, "max_new_tokens": COUNT,
    "temperature": Maybe(number(0, 100)), "gamma": COUNT, "controller": NAME, "torch_threads": COUNT,
    "fast_path": Maybe(BOOL), "machine": Maybe(MACHINE), "kernels": Maybe(KERNELS), "compiled": NAME,
    "verify_cost_median_s": Maybe(ListOf(number(0, 1e6), 1024, "a list of at most 1024 times")), "date": NAME,
}, strict=False)
ROWS = ListOf(ROW, MAX_REPORT_ROWS, f"a list of at most {MAX_REPORT_ROWS} rows")
REPORT = Record({"rows": ROWS, "meta": Maybe(META)}, ("rows",), strict=False, words="an object with rows")
REPORT_VALUES = 64 * (MAX_REPORT_ROWS + 1)  # a row holds about 25 values; the meta about 40


def load_bench_report(data: bytes | str) -> dict:
    """A benchmark report from JSON, every value the Compare view reads checked; ``ExplorerError``
    with one line otherwise."""
    try:
        report = parse(data, MAX_REPORT_BYTES)
        REPORT.check(report, "report")
        check_plain(report, "report", REPORT_VALUES, MAX_JSON_DEPTH, MAX_NAME_CHARS)
    except Refused as err:
        raise ExplorerError(f"not a benchmark report: {err} (expected the JSON that `python -m explorer bench` "
                            "writes)") from None
    return report


def row_doubt(row: dict, baseline: dict | None, key: str = "speedup_vs_ar") -> str | None:
    """Why ``row``'s speed-up over ``baseline`` (a row of the same report: ``ar``, or ``hf-generate`` for ``key``
    ``speedup_vs_hf``) is not a fact, in words; None when it is, or cannot be judged (no such baseline, a report
    from before the pace was recorded). The rule of ``explorer.ratios``: the pace probed before the row's runs and
    before the baseline's held, and a lossless row gains no more over plain decoding than its tokens per target
    forward allow (a row that does not say whether it is lossy counts as lossless only where it matched ``ar``)."""
    if baseline is None or row is baseline or row.get(key) is None:
        return None
    moved = pace_words(row.get("pace_ms") or (), baseline.get("pace_ms") or (), "this system", "the baseline")
    if moved is not None:
        return moved
    if key != "speedup_vs_ar":
        return None  # Hugging Face's step is not ours: no bound from our tokens per target forward
    lossy = row.get("lossy")
    if lossy is None:
        lossy = False if row.get("identical_to_ar") is True else None
    return impossible_speedup(row[key], row.get("tokens_per_target_forward"), lossy)


LATEST = "bench-latest.json"  # the shipped benchmark Compare opens on: today's methods (tests/test_bench_shipped.py)


def benchmark_label(name: str, report: dict) -> str:
    """A shipped benchmark as the Compare tab's menu names it: its file, how many systems, when and where it was
    measured ("quantized: quantized, quantized@6, quantized:alone, … (10 systems, AMD EPYC)")."""
    meta = report.get("meta") or {}
    cpu = (meta.get("machine") or {}).get("cpu") if isinstance(meta.get("machine"), dict) else None
    where = "GPU" if str(meta.get("device") or "").startswith("cuda") else cpu
    said = [f"{len(report['rows'])} systems", meta.get("date"), where,
            {"heldout": "held-out prompts"}.get(meta.get("prompt_set"))]
    methods = [r["system"] for r in report["rows"] if r["system"] != "ar" and not r["system"].startswith("hf-")]
    shown = ", ".join(methods[:3]) + (", …" if len(methods) > 3 else "")
    stem = name.removesuffix(".json").removeprefix("bench-")
    return f"{stem}: {shown} (" + ", ".join(str(x) for x in said if x) + ")"
