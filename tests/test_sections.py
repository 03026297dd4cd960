"""The Compare and BiLD-sweep sections' input handling (no browser)."""

import json
from pathlib import Path

import pytest

from explorer.errors import ExplorerError
from explorer.ui.sections import LATEST_BENCH, load_bench_report, parse_thresholds


def test_the_shipped_benchmark_report_loads():
    report = load_bench_report(LATEST_BENCH.read_text())
    assert {r["system"] for r in report["rows"]} >= {"hf-generate", "ar"}


@pytest.mark.parametrize("text", ["{", "[]", json.dumps({"rows": [{"system": "x"}]}), json.dumps({"schema": 1})])
def test_a_bad_benchmark_file_is_refused_clearly(text):
    with pytest.raises(ExplorerError, match="not a benchmark report"):
        load_bench_report(text)


def test_thresholds():
    assert parse_thresholds("0.2, 0.5", "α_FB", allow_inf=False) == (0.2, 0.5)
    assert parse_thresholds("1, inf", "α_RB", allow_inf=True)[-1] == float("inf")
    for text, allow in (("", False), ("a, b", False), ("inf", False), (",".join(["1"] * 9), True)):
        with pytest.raises(ExplorerError):
            parse_thresholds(text, "α", allow_inf=allow)


def test_shipped_report_is_in_assets():
    assert LATEST_BENCH.parent == Path(__file__).resolve().parents[1] / "assets"
