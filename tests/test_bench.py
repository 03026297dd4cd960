"""The side-by-side benchmark on the real default model, kept tiny: its rows carry the documented keys
and the comparisons it makes (outputs identical to ar, speedups relative to the same runs)."""

import pytest

from explorer import bench
from explorer.errors import ExplorerError

KEYS = {"system", "method", "draft", "controller", "tokens_per_s", "speedup_vs_hf", "speedup_vs_ar",
        "acceptance_rate", "tokens_per_target_forward", "c", "predicted_speedup", "identical_to_ar"}


def test_bench_rows(default_model):
    prompts = [p for p in bench.load_prompts() if p["category"] in ("rewrite", "qa")][:2]
    systems = ("hf-generate", "hf-assisted:prompt-lookup:3", "speculative:prompt-lookup:3",
               "speculative:early-exit:4/cost-aware")
    lines = []
    report = bench.run("default", systems, repeats=2, max_new_tokens=8, prompts=prompts, progress=lambda done, total, line: lines.append(line))
    rows = {r["system"]: r for r in report["rows"]}
    assert set(rows) == set(systems) | {"ar"}  # ar is always measured: every row is compared with it
    for row in rows.values():
        assert KEYS <= set(row)
        assert row["tokens_per_s"] > 0 and row["identical_to_ar"] is True
        assert row["tokens_per_s_min"] <= row["tokens_per_s"] <= row["tokens_per_s_max"]
    assert rows["ar"]["speedup_vs_ar"] == 1.0 and rows["hf-generate"]["speedup_vs_hf"] == 1.0
    assert rows["speculative:prompt-lookup:3"]["acceptance_rate"] is not None
    assert rows["speculative:early-exit:4/cost-aware"]["controller"] == "cost-aware"
    assert len(lines) == 2 * len(prompts) * 5 and "tok/s" in lines[0]
    ratios = report["meta"]["verify_cost_ratio"]
    assert ratios[0] == 1.0 and ratios == sorted(ratios)
    table = bench.markdown(report)
    assert table.count("\n| ") >= 5 and "× HF generate" in table


def test_a_system_may_carry_its_own_gamma():
    own = bench.parse_system("speculative:early-exit:4/beta-ts@8", 4, "fixed")
    assert (own.method, own.draft, own.controller, own.gamma) == ("speculative", "early-exit:4", "beta-ts", 8)
    assert bench.parse_system("hf-assisted:early-exit:4@2", 4, "fixed").gamma == 2
    assert bench.parse_system("speculative:early-exit:4", 4, "fixed").gamma == 4  # the run's --gamma


@pytest.mark.parametrize("name", ["gpu-magic", "speculative:", "hf-assisted:model:default", "ar@2",
                                  "speculative:early-exit:4@0", "speculative:early-exit:4@x", "bita@2"])
def test_unknown_systems_are_refused(name):
    with pytest.raises(ExplorerError, match="unknown system|bad system"):
        bench.parse_system(name, 4, "fixed")


def test_a_report_with_part_of_the_meta_says_no_question_marks():
    """Issue 29: a race's report footnote read "? threads … γ = ? (?)"."""
    from explorer import bench

    row = {"system": "speculative:prompt-lookup:3", "tokens_per_s": 10.0, "speedup_vs_ar": 1.2}
    table = bench.markdown({"rows": [row], "meta": {"model": "default", "prompts": 1, "repeats": 1}})
    assert "?" not in table and table.splitlines()[-1] == "default, 1 prompts × 1 repeats."
