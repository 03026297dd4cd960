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
    assert list(measured.x) == [r["system"] for r in REPORT["rows"]]
    assert list(measured.y) == pytest.approx([r[key] for r in REPORT["rows"]])
    spec = next(r for r in REPORT["rows"] if r["system"] == "speculative:prompt-lookup:3")
    i = list(thm.x).index(spec["system"])
    scale = 1.0 if against == "ar" else spec["speedup_vs_hf"] / spec["speedup_vs_ar"]
    assert thm.y[i] == pytest.approx(spec["predicted_speedup"] * scale)
    assert thm_cost.y[i] == pytest.approx(spec["predicted_speedup_verify_cost"] * scale)
    assert "speed-up over" in fig.layout.yaxis.title.text and fig.layout.xaxis.title.text == "system"
    assert "measured vs predicted" in fig.layout.title.text
