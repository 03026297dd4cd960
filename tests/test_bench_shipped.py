"""Compare reads a benchmark of today's methods, and no benchmark view prints a ratio that is not a fact (#48), from
the shipped and saved reports (no model): ``bench``'s default systems hold every method of the README's results
table; the Compare tab offers every benchmark that ships and opens on the one that holds them; a row whose runs met
another pace than plain decoding's, or a lossless row faster than its tokens per target forward allow, is withheld
in the table and gets no bar, with the reason in words; a T(n) curve whose medians say T(n) < T(1) is not shown."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from explorer import bench
from explorer.reports import LATEST, benchmark_label, row_doubt
from explorer.ui.sections import shipped_benchmarks
from explorer.viz.compare import compare_figure

ROOT = Path(__file__).resolve().parent.parent


def readme_results_systems() -> list[str]:
    """The systems of the README's results table: each row's first backticked name (``quantized:alone``,
    ``speculative:prompt-lookup:3``, ``ar``), and Hugging Face's generate, which its "× HF generate" column needs."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| system")]
    systems = [re.search(r"`([^`]+)`", row.split("|")[1]).group(1) for row in rows]
    assert len(systems) >= 5 and "ar" in systems and "× HF `generate`" in section
    return systems + ["hf-generate"]


def test_bench_measures_every_method_of_the_readmes_results_by_default():
    assert set(readme_results_systems()) <= set(bench.DEFAULT_SYSTEMS)
    for name in bench.DEFAULT_SYSTEMS:  # each a system the benchmark takes
        bench.parse_system(name, 4, "fixed")


def test_the_benchmark_compare_opens_on_has_a_row_for_every_method_of_the_readmes_results():
    name, report = next(iter(shipped_benchmarks().items()))
    assert name == LATEST
    assert set(readme_results_systems()) <= {r["system"] for r in report["rows"]}
    assert report["meta"].get("date") and report["meta"].get("machine")  # it says when and where


def test_compare_offers_every_benchmark_that_ships_and_opens_on_the_latest():
    offered = shipped_benchmarks()
    assert list(offered)[0] == LATEST
    assert set(offered) == {f.name for f in (ROOT / "assets").glob("bench-*.json")}
    assert "bench-quantized.json" in offered  # it shipped, and the page never offered it (#48)
    label = benchmark_label("bench-quantized.json", offered["bench-quantized.json"])
    assert label.startswith("quantized: quantized, quantized@6, quantized:alone, …") and "AMD EPYC" in label


def test_the_compare_tab_menu_lists_them():
    import gradio as gr

    from explorer.ui.sections import compare_section

    with gr.Blocks() as demo:
        compare_section()
    (menu,) = [b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "compare-shipped"]
    assert [value for _, value in menu.choices] == list(shipped_benchmarks()) and menu.value == LATEST


def report(**suffix) -> dict:
    """A saved report as ``bench --quick`` wrote it on a busy machine (#48): suffix ×2.99 at 1.48 tokens a target
    forward; quantized timed at another pace than plain decoding; T(1) slowed, so T(n)/T(1) read 1.00 for every n."""
    rows = [
        {"system": "hf-generate", "tokens_per_s": 13.0, "speedup_vs_ar": 0.45, "speedup_vs_hf": 1.0, "lossy": False,
         "pace_ms": [1.6, 1.7]},
        {"system": "ar", "tokens_per_s": 29.0, "speedup_vs_ar": 1.0, "speedup_vs_hf": 2.23, "lossy": False,
         "tokens_per_target_forward": 1.0, "pace_ms": [1.6, 1.7]},
        {"system": "suffix", "tokens_per_s": 86.7, "speedup_vs_ar": 2.99, "speedup_vs_hf": 6.67, "lossy": False,
         "tokens_per_target_forward": 1.48, "identical_to_ar": True, "pace_ms": [1.6, 1.7],
         "predicted_speedup_verify_cost": 1.31, **suffix},
        {"system": "quantized", "tokens_per_s": 60.0, "speedup_vs_ar": 2.07, "speedup_vs_hf": 4.6, "lossy": False,
         "tokens_per_target_forward": 12.8, "identical_to_ar": True, "pace_ms": [4.6, 5.7]},
        {"system": "quantized:alone", "tokens_per_s": 86.0, "speedup_vs_ar": 2.97, "speedup_vs_hf": 6.6, "lossy": True,
         "tokens_per_target_forward": None, "identical_to_ar": False, "pace_ms": [1.7, 1.6]},
    ]
    return {"rows": rows, "meta": {"model": "default", "prompts": 5, "repeats": 1, "verify_cost_ratio": [1.0] * 6,
                                   "verify_cost_median_s": [0.080, 0.041, 0.043, 0.045, 0.047, 0.050]}}


def test_a_busy_benchmarks_impossible_and_moved_ratios_are_withheld_with_the_reason():
    table = bench.markdown(report())
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:]] for line in table.splitlines()
             if line.startswith("| ") and not line.startswith("| system")}
    assert cells["suffix"][2] == "withheld (1)" and cells["suffix"][1] == "6.67"  # × HF: no bound, the pace held
    assert cells["quantized"][1].startswith("withheld") and cells["quantized"][2].startswith("withheld")
    assert cells["quantized:alone"][2] == "2.97"  # lossy: it may skip the target, the pace held
    assert cells["ar"][2] == "1.00"
    assert "×2.99 is more than a lossless run with 1.48 tokens per target pass can gain" in table
    assert "5.2 ms while this system ran and 1.6 ms while the baseline did" in table
    assert "2.99" not in table.replace("×2.99 is more", "")  # the figure only inside its refusal
    assert "T(n)/T(1) not shown" in table and "T(2)/T(1) = 0.51" in table and "1.00, 1.00" not in table
    assert cells["suffix"][10] == "–"  # Theorem 3.8 priced by that curve is not shown either


def test_an_honest_report_keeps_every_figure():
    quiet = report(speedup_vs_ar=1.29)
    quiet["rows"][3]["pace_ms"] = [1.6, 1.8]
    quiet["meta"]["verify_cost_median_s"] = [0.040, 0.046, 0.049, 0.051, 0.052, 0.055]
    table = bench.markdown(quiet)
    assert "withheld" not in table and "not shown" not in table and "| 1.29 |" in table
    assert "T(n)/T(1) for n = 1…6: 1.00" in table


def test_a_withheld_speedup_gets_no_bar_and_says_why_when_pointed_at():
    figure = compare_figure(report())
    measured = next(t for t in figure.data if t.name == "measured")
    bars = dict(zip(measured.y, measured.x))
    assert bars["suffix"] is None and bars["quantized"] is None and bars["quantized:alone"] == 2.97
    withheld = next(t for t in figure.data if t.name.startswith("measured: withheld"))
    assert set(withheld.y) == {"suffix", "quantized"} and "1.48 tokens per<br>target pass" in withheld.customdata[0][0]


def test_a_report_from_before_the_rule_is_judged_by_what_it_holds():
    """No pace samples, no ``lossy``: a row that matched plain decoding is lossless and bound; one that did not
    (or sampled) is not judged."""
    old = {"system": "suffix", "tokens_per_s": 86.7, "speedup_vs_ar": 2.99, "tokens_per_target_forward": 1.48}
    ar = {"system": "ar", "tokens_per_s": 29.0, "speedup_vs_ar": 1.0}
    assert row_doubt(old, ar) is None
    assert row_doubt({**old, "identical_to_ar": True}, ar) is not None
    assert row_doubt(ar, ar) is None and row_doubt(old, None) is None
    for name, shipped in shipped_benchmarks().items():  # the shipped benchmarks were measured on quiet machines
        assert "withheld" not in bench.markdown(shipped), name
