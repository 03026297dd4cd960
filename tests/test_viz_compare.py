"""The Compare view from a saved benchmark report (no model)."""

import json
from pathlib import Path

import pytest

from explorer.viz.compare import compare_figure

REPORT = json.loads((Path(__file__).parent / "data" / "bench_report.json").read_text())


@pytest.mark.parametrize("against,key", [("ar", "speedup_vs_ar"), ("hf", "speedup_vs_hf")])
def test_measured_and_predicted_bars_per_system(against, key):
    fig = compare_figure(REPORT, against)
    measured, thm, thm_cost = fig.data
    # bars across: a long name breaks after its method, so a phone keeps room for the bars
    assert [y.replace("<br>", "") for y in measured.y] == [r["system"] for r in REPORT["rows"]]
    assert measured.orientation == "h" and "speculative:<br>prompt-lookup:3" in measured.y
    assert list(measured.x) == pytest.approx([r[key] for r in REPORT["rows"]])
    spec = next(r for r in REPORT["rows"] if r["system"] == "speculative:prompt-lookup:3")
    i = list(thm.y).index("speculative:<br>prompt-lookup:3")
    scale = 1.0 if against == "ar" else spec["speedup_vs_hf"] / spec["speedup_vs_ar"]
    assert thm.x[i] == pytest.approx(spec["predicted_speedup"] * scale)
    assert thm_cost.x[i] == pytest.approx(spec["predicted_speedup_verify_cost"] * scale)
    assert "speed-up over" in fig.layout.xaxis.title.text and fig.layout.yaxis.title.text == "system"
    assert "measured vs predicted" in fig.layout.title.text


def test_a_prediction_no_row_has_gets_no_legend_entry_and_missing_counts_no_question_mark():
    rows = [{k: v for k, v in r.items() if k != "predicted_speedup_verify_cost"} for r in REPORT["rows"]]
    fig = compare_figure({"rows": rows, "meta": {"model": "default"}})
    assert [t.name for t in fig.data] == ["measured", "Theorem 3.8 (verify = 1 step)"]
    assert "?" not in fig.layout.title.text and fig.layout.title.text.endswith("· default")
