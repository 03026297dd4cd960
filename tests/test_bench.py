"""The side-by-side benchmark on the real default model, kept tiny: its rows carry the documented keys
and the comparisons it makes (outputs identical to ar, speedups relative to the same runs)."""

import json

import pytest

from explorer import bench
from explorer.errors import ExplorerError
from explorer.reports import load_bench_report

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
    # where a token's time went, from the rounds' clocks: every part measured, together within the wall time
    # (the wall time also holds the decode's set-up), and only our own decodes have it
    for name in ("ar", "speculative:prompt-lookup:3", "speculative:early-exit:4/cost-aware"):
        ms = rows[name]["ms_per_token"]
        assert set(ms) == {"draft", "verify", "other"} and ms["verify"] > 0 and ms["other"] > 0
        assert sum(ms.values()) <= 1000 / rows[name]["tokens_per_s_min"]
    assert rows["ar"]["ms_per_token"]["draft"] < 0.1 * rows["ar"]["ms_per_token"]["verify"]
    assert rows["speculative:early-exit:4/cost-aware"]["ms_per_token"]["draft"] > rows["ar"]["ms_per_token"]["draft"]
    assert rows["hf-generate"]["ms_per_token"] is None
    # how many runs, then each run's line with the time left from the runs so far (#48)
    assert len(lines) == 1 + 2 * len(prompts) * 5 and "the time left follows each run" in lines[0]
    assert "tok/s" in lines[1] and " left" in lines[1] and " left" not in lines[-1]
    ratios = report["meta"]["verify_cost_ratio"]
    assert ratios[0] == 1.0 and ratios == sorted(ratios)
    # what the honesty rule reads (#48): the medians behind the curve, each run's pace probe, lossless or not
    assert len(report["meta"]["verify_cost_median_s"]) == len(ratios) and report["meta"]["date"]
    for row in rows.values():
        assert len(row["pace_ms"]) == 2 * len(prompts) and all(p > 0 for p in row["pace_ms"]) and row["lossy"] is False
    table = bench.markdown(report)
    assert table.count("\n| ") >= 5 and "× HF generate" in table
    # the machine it was measured on, and how it ran the model (#26: figures that say their machine)
    meta = report["meta"]
    assert meta["machine"]["cpu"] and meta["machine"]["cores"] >= 1 and meta["machine"]["torch"]
    assert set(meta["kernels"]["kinds"]) == {"1", "2-8", "9-64"} and meta["fast_path"] is True
    assert f"Measured on {meta['machine']['cpu']}" in table and "kernels 1 row: " in table
    ms = rows["ar"]["ms_per_token"]
    assert "ms / token: draft · verify · rest" in table
    assert f"| {ms['draft']:.1f} · {ms['verify']:.1f} · {ms['other']:.1f} |" in table


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
    assert "?" not in table and table.splitlines()[-1] == "default, 1 prompt × 1 repeat."


def test_a_reports_machine_is_shown_escaped_and_a_bad_one_refused():
    """An uploaded report's machine is a stranger's text: shown as text on the page, checked field by field."""
    import json

    from explorer.reports import load_bench_report
    from explorer.viz import safe_markdown

    row = {"system": "ar", "tokens_per_s": 10.0, "speedup_vs_ar": 1.0}
    meta = {"model": "default", "machine": {"cpu": "<img src=x onerror=alert(1)> CPU", "cores": 2, "l3": "32 MB",
                                            "units": ["AVX2"], "torch": "2.13.0"},
            "kernels": {"kinds": {"1": "mkl", "2-8": "onednn-8", "9-64": "onednn-8"}, "how": "measured"},
            "compiled": "compiled, loaded in 2.2 s"}
    report = load_bench_report(json.dumps({"rows": [row], "meta": meta}))
    table = bench.markdown(report, text=safe_markdown)
    assert "<img" not in table and "32 MB" in table and "1 row: mkl" in table and "compiled, loaded" in table
    for bad in ({"cores": "two"}, {"units": "AVX2"}, {"cpu": "x" * 5000}):
        with pytest.raises(ExplorerError, match="not a benchmark report"):
            load_bench_report(json.dumps({"rows": [row], "meta": {"machine": {**meta["machine"], **bad}}}))


def test_a_lossy_row_says_how_much_of_plain_decodings_text_it_kept():
    """The low-bit copy decoding alone is lossy: its row is not identical, and says the share of plain
    decoding's tokens it kept (on the tiny random model, a copy that parts often); the lossless row says yes."""
    report = bench.run("tiny-random:1", systems=("ar", "quantized:alone", "quantized"), repeats=1, max_new_tokens=12,
                       prompts=[{"category": "chat", "text": "hello there"}], progress=lambda *a: None)
    rows = {r["system"]: r for r in report["rows"]}
    alone, drafted = rows["quantized:alone"], rows["quantized"]
    assert alone["identical_to_ar"] is False and 0 <= alone["agreement_with_ar"] < 1
    assert drafted["identical_to_ar"] is True and drafted["agreement_with_ar"] is None
    table = bench.markdown(report)
    assert f"**no** ({alone['agreement_with_ar']:.0%} of tokens)" in table
    loaded = load_bench_report(json.dumps(report))  # a shared report keeps it, checked as a rate
    assert loaded["rows"][1]["agreement_with_ar"] == alone["agreement_with_ar"]


# -- llama.cpp on the default's GGUF, where it is installed (#49) --------------------------------------------

def test_llama_cpp_is_a_system_and_says_what_it_needs(monkeypatch):
    import sys

    system = bench.parse_system("llama-cpp", 4, "fixed")
    assert system.method == "llama-cpp" and "llama-cpp" in bench.system_grammar()
    with pytest.raises(ExplorerError, match="another program"):
        bench.decode_keywords(system)
    with pytest.raises(ExplorerError, match="default model's own GGUF"):
        bench.run("tiny-random:1", ("ar", "llama-cpp"), repeats=1, max_new_tokens=2)
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # not installed: the build command, in one line
    from explorer.llama_cpp_peer import LlamaCppPeer

    class Default:
        name = "default"
    with pytest.raises(ExplorerError, match="pip install llama-cpp-python"):
        LlamaCppPeer(Default())


@pytest.mark.model
def test_llama_cpp_decodes_the_same_gguf_lossily(default_model):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is optional (it builds for ~10 min)")
    report = bench.run("default", ("ar", "llama-cpp"), repeats=1, max_new_tokens=12,
                       prompts=bench.load_prompts()[:2])
    row = next(r for r in report["rows"] if r["system"] == "llama-cpp")
    assert row["lossy"] and row["tokens_per_s"] > 0
    assert row["identical_to_ar"] is False or row["agreement_with_ar"] is None  # the 4-bit model's own text
