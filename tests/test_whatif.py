"""What if: engine counters with known answers read back exactly, the best γ equals a brute-force maximum
over the raw per-draft acceptance lengths, and every bad file gets one line (CLI exit 2)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import explorer
from explorer import whatif
from explorer.cli import main
from explorer.errors import ExplorerError
from explorer.reports import load_bench_report
from explorer.ui.sections import LATEST_BENCH
from explorer.viz.whatif import whatif_figure

EXAMPLE = LATEST_BENCH.parent / "whatif" / "vllm-metrics-example.txt"


def vllm_metrics(per_engine: dict[tuple[str, str], list[int]], drafts: dict, k: int | None = None,
                 accepted: dict | None = None) -> str:
    """A vLLM v1 /metrics excerpt, as its Prometheus client writes it, for engines {(model, engine):
    accepted-at-position counts}; draft tokens are drafts × K."""
    lines = []
    for name, doc in (("num_drafts", "Number of spec decoding drafts."), ("num_draft_tokens", "Number of draft tokens."),
                      ("num_accepted_tokens", "Number of accepted tokens."),
                      ("num_accepted_tokens_per_pos", "Accepted tokens per draft position.")):
        lines += [f"# HELP vllm:spec_decode_{name}_total {doc}", f"# TYPE vllm:spec_decode_{name}_total counter"]
        for (model, engine), per in per_engine.items():
            labels = f'engine="{engine}",model_name="{model}"'
            value = {"num_drafts": drafts[(model, engine)], "num_draft_tokens": drafts[(model, engine)] * (k or len(per)),
                     "num_accepted_tokens": (accepted or {}).get((model, engine), sum(per))}.get(name)
            if name == "num_accepted_tokens_per_pos":
                lines += [f'vllm:spec_decode_{name}_total{{{labels},position="{i}"}} {float(v)}' for i, v in enumerate(per)]
            else:
                lines.append(f"vllm:spec_decode_{name}_total{{{labels}}} {float(value)}")
                lines.append(f"vllm:spec_decode_{name}_created{{{labels}}} 1.7643e+09")
    return "\n".join(lines) + "\n"


def counts_from_lengths(lengths, k: int) -> list[int]:
    """vLLM's per-position counters for drafts that accepted ``lengths`` tokens each (a prefix)."""
    return [int(sum(1 for n in lengths if n > i)) for i in range(k)]


def brute_force_best(lengths, c: float, verify) -> int:
    """argmax over γ = 0 … K of (1 + mean over drafts of min(accepted, γ)) / (γ·c + T(γ+1)/T(1)), straight
    from the raw per-draft lengths (no shares, no formula from the module)."""
    k = max(lengths) if len(lengths) else 0
    scores = []
    for g in range(len(verify)):
        tokens = 1 + sum(min(n, g) for n in lengths) / len(lengths)
        scores.append(tokens / (g * c + verify[g]))
    best = max(scores)
    return min(g for g, s in enumerate(scores) if abs(s - best) < 1e-12), k


def test_two_engines_are_told_apart_and_read_exactly():
    text = vllm_metrics({("llama-8b", "0"): [800, 560, 330, 150, 60], ("qwen-7b", "1"): [90, 40, 10]},
                        {("llama-8b", "0"): 1000, ("qwen-7b", "1"): 100})
    llama, qwen = sorted(whatif.read(text), key=lambda d: d.name)
    assert "llama-8b" in llama.name and "engine=0" in llama.name and llama.engine == "vLLM"
    assert llama.share == (0.8, 0.56, 0.33, 0.15, 0.06) and llama.observed
    assert llama.drafts == 1000 and llama.draft_tokens == 5000 and llama.accepted_tokens == 1900
    assert llama.conditional == pytest.approx((0.8, 0.7, 0.33 / 0.56, 0.15 / 0.33, 0.4))
    assert llama.mean_length == pytest.approx(2.9)  # vLLM's 1 + accepted / drafts
    assert qwen.share == (0.9, 0.4, 0.1) and qwen.mean_length == pytest.approx(2.4)
    result = whatif.analyse(llama, 0.1)
    alpha = result["iid_alpha"]
    assert sum(alpha ** i for i in range(6)) == pytest.approx(2.9, abs=1e-9)  # same mean length as observed
    assert result["expected_tokens_by_gamma"] == pytest.approx([1, 1.8, 2.36, 2.69, 2.84, 2.9])
    assert result["speedup_by_gamma"][3] == pytest.approx(2.69 / 1.3)
    assert result["best_gamma"] == 3 and "Set num_speculative_tokens to 3" in whatif.explain(result)


@pytest.mark.parametrize("seed", range(6))
def test_best_gamma_is_the_brute_force_maximum(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 9))
    # per-draft accepted lengths from a position-dependent (not i.i.d.) acceptance: early positions easy
    rates = np.sort(rng.uniform(0.1, 0.95, k))[::-1]
    lengths = []
    for _ in range(int(rng.integers(50, 400))):
        n = 0
        while n < k and rng.random() < rates[n]:
            n += 1
        lengths.append(n)
    text = vllm_metrics({("m", "0"): counts_from_lengths(lengths, k)}, {("m", "0"): len(lengths)})
    (drafter,) = whatif.read(text)
    for c in (0.0, 0.02, 0.1, 0.3, 1.0):
        for verify in (None, tuple(1 + 0.07 * n for n in range(k + 1)), tuple(1 + 0.4 * n for n in range(k + 1))):
            flat = verify or tuple([1.0] * (k + 1))
            result = whatif.analyse(drafter, c, verify)
            expected, _ = brute_force_best(lengths, c, flat)
            assert result["best_gamma"] == expected, (c, verify)
            assert result["mean_acceptance_length"] == pytest.approx(1 + np.mean(lengths))


def test_a_vllm_log_line_and_several_pooled():
    line = ("INFO 11-25 10:00:00 [metrics.py:86] SpecDecoding metrics: Mean acceptance length: 2.90, Accepted "
            "throughput: 12.50 tokens/s, Drafted throughput: 40.00 tokens/s, Accepted: 1900 tokens, Drafted: 5000 "
            "tokens, Per-position acceptance rate: 0.800, 0.560, 0.330, 0.150, 0.060, Avg Draft acceptance rate: 38.0%")
    (one,) = whatif.read(line)
    assert one.share == pytest.approx((0.8, 0.56, 0.33, 0.15, 0.06)) and one.drafts == pytest.approx(1000)
    assert one.draft_tokens == 5000 and one.accepted_tokens == 1900 and one.engine == "vLLM"
    other = line.replace("2.90", "1.50").replace("Accepted: 1900", "Accepted: 150").replace(
        "0.800, 0.560, 0.330, 0.150, 0.060", "0.300, 0.100, 0.050, 0.030, 0.020")
    (pooled,) = whatif.read(line + "\nsomething else\n" + other)
    # 1000 drafts at the first rates and 300 at the second, weighted by drafts
    assert pooled.drafts == pytest.approx(1300)
    assert pooled.share[0] == pytest.approx((800 + 90) / 1300) and pooled.accepted_tokens == 2050


def test_vllm_v0_line_gives_the_iid_fit_and_says_so():
    line = ("INFO Speculative metrics: Draft acceptance rate: 0.500, System efficiency: 0.400, Number of speculative "
            "tokens: 4, Number of accepted tokens: 2000, Number of draft tokens: 4000, Number of emitted tokens: 2800.")
    (drafter,) = whatif.read(line)
    assert not drafter.observed and drafter.positions == 4 and drafter.drafts == 1000
    assert drafter.mean_length == pytest.approx(3.0, abs=1e-9)
    assert "gives only a mean acceptance length" in whatif.explain(whatif.analyse(drafter))


def test_llama_cpp_timings_one_response_a_list_and_the_bare_object():
    response = {"model": "qwen.gguf", "timings": {"prompt_n": 4, "predicted_n": 665, "predicted_ms": 20629.2,
                                                  "draft_n": 604, "draft_n_accepted": 515}}
    (one,) = whatif.read(json.dumps(response))
    # 665 tokens from 665 − 515 = 150 target forwards; drafts of ⌈604 / 150⌉ = 5
    assert one.engine == "llama.cpp" and not one.observed and one.positions == 5
    assert one.mean_length == pytest.approx(665 / 150, abs=1e-9) and one.drafts == 150 and "qwen.gguf" in one.name
    (bare,) = whatif.read(json.dumps(response["timings"]), gamma=8)
    assert bare.positions == 8 and bare.mean_length == pytest.approx(665 / 150, abs=1e-9)
    other = {"model": "llama.gguf", "timings": {"predicted_n": 100, "draft_n": 80, "draft_n_accepted": 20}}
    pooled = whatif.read(json.dumps([response, response, other]))
    assert [d.name for d in pooled] == ["llama.cpp · qwen.gguf", "llama.cpp · llama.gguf"]
    assert pooled[0].draft_tokens == 1208 and pooled[1].mean_length == pytest.approx(100 / 80, abs=1e-9)


def test_sglang_gauge_and_log():
    text = ('# TYPE sglang:spec_accept_length gauge\n'
            'sglang:spec_accept_length{dp_rank="0",engine_type="unified",model_name="glm",tp_rank="0"} 2.5\n'
            '# TYPE sglang:spec_accept_rate gauge\n'
            'sglang:spec_accept_rate{dp_rank="0",engine_type="unified",model_name="glm",tp_rank="0"} 0.5\n')
    (drafter,) = whatif.read(text)
    assert drafter.engine == "SGLang" and drafter.positions == 3 and drafter.mean_length == pytest.approx(2.5, abs=1e-9)
    log = "\n".join(f"[2026-11-25] Decode batch. #running-req: 1, accept len: {v:.2f}, gen throughput (token/s): 90"
                    for v in (2.0, 3.0))
    (logged,) = whatif.read(log, gamma=4)
    assert logged.positions == 4 and logged.mean_length == pytest.approx(2.5, abs=1e-9)
    with pytest.raises(ExplorerError, match="give the draft length"):
        whatif.read(log)


def test_the_explorers_own_run_and_report(tiny_target, tiny_draft):
    trace = explorer.decode(tiny_target, prompt_ids=[5, 6, 7, 8], draft=tiny_draft, gamma=4, max_new_tokens=40)
    drafter = whatif.read(trace.to_json())[0]
    from explorer.trace import acceptance_by_position

    tested, accepted = acceptance_by_position([r for r in trace.rounds if r.drafted])
    assert drafter.share[0] == pytest.approx(accepted[0] / tested[0])
    assert drafter.conditional[1] == pytest.approx(accepted[1] / tested[1] if tested[1] else 0.0)
    assert drafter.draft_cost == trace.summary.c_measured and drafter.engine == "explorer"
    report = load_bench_report(LATEST_BENCH.read_text())
    rows = whatif.read(LATEST_BENCH.read_text())
    drafting = [r for r in report["rows"] if r.get("acceptance_by_position")]
    assert len(rows) == len(drafting) and rows[0].verify_cost == tuple(report["meta"]["verify_cost_ratio"])
    result = whatif.analyse(rows[0])  # its own c and T(n) unless the user gives others
    assert result["draft_cost_from"] == "measured" and not result["verify_cost_flat"]


def test_the_json_has_the_documented_keys(capsys):
    assert main(["whatif", "--metrics", str(EXAMPLE), "--json", "--draft-cost", "0.1"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["drafters"]
    for key in ("acceptance_by_position", "conditional_by_position", "mean_acceptance_length", "iid_alpha",
                "speedup_by_gamma", "best_gamma"):
        assert key in result
    assert result["best_gamma"] == 3 and len(result["speedup_by_gamma"]) == 6 and result["speedup_by_gamma"][0] == 1


def test_the_cli_prints_a_table_and_words_and_writes_a_chart(capsys, tmp_path):
    page = tmp_path / "chart.html"
    assert main(["whatif", "--metrics", str(EXAMPLE), "--verify-cost", "1,1.1,1.2", "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "← best" in out and "num_speculative_tokens" in out and "T(γ+1)/T(1)" in out
    assert page.stat().st_size > 100_000 and "What if" in page.read_text()  # plotly.js inline: opens offline


def test_the_verify_cost_curve_is_extended_and_checked():
    assert whatif.verify_ratio(None, 7) == 1.0
    assert whatif.verify_ratio((1.0, 1.1, 1.3), 2) == 1.1
    assert whatif.verify_ratio((1.0, 1.1, 1.3), 5) == pytest.approx(1.7)  # linear past the end
    for bad in ("1,x", "2,3", "1,0.9", "1,nan", ",".join(["1"] * 70)):
        with pytest.raises(ExplorerError):
            whatif.parse_verify_cost(bad)
    for bad in (-1, float("nan"), 11, "x"):
        with pytest.raises(ExplorerError):
            whatif.check_draft_cost(bad)


def test_speculation_that_never_pays_says_turn_it_off():
    (drafter,) = whatif.read(vllm_metrics({("m", "0"): [50, 10]}, {("m", "0"): 1000}))
    result = whatif.analyse(drafter, 0.5)
    assert result["best_gamma"] == 0 and "turn it off" in whatif.explain(result)


BAD = {
    "plain words": "hello world, this is not a metrics page",
    "metrics without spec decoding": "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 3.0\n",
    "a negative count": vllm_metrics({("m", "0"): [5, 3]}, {("m", "0"): 10}).replace(
        'position="1"} 3.0', 'position="1"} -3.0').replace("num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 8.0",
                                                          "num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 2.0"),
    "a later position accepted more": vllm_metrics({("m", "0"): [3, 5]}, {("m", "0"): 10}),
    "positions that do not add up": vllm_metrics({("m", "0"): [5, 3]}, {("m", "0"): 10}, accepted={("m", "0"): 9}),
    "more accepted than drafts": vllm_metrics({("m", "0"): [50, 3]}, {("m", "0"): 10}),
    "no drafts yet": vllm_metrics({("m", "0"): [0, 0]}, {("m", "0"): 0}),
    "a NaN counter": vllm_metrics({("m", "0"): [5, 3]}, {("m", "0"): 10}).replace(
        'num_drafts_total{engine="0",model_name="m"} 10.0', 'num_drafts_total{engine="0",model_name="m"} NaN'),
    "a missing position": vllm_metrics({("m", "0"): [5, 3, 1]}, {("m", "0"): 10}).replace('position="1"', 'position="7"'),
    "a position past 64": vllm_metrics({("m", "0"): [5]}, {("m", "0"): 10}).replace('position="0"', 'position="99"'),
    "too many engines": vllm_metrics({(f"m{i}", "0"): [1] for i in range(40)}, {(f"m{i}", "0"): 10 for i in range(40)}),
    "empty": "   \n",
    "broken JSON": '{"timings": {"draft_n": 1',
    "JSON without timings": '{"choices": []}',
    "timings with more accepted than drafted": '{"timings": {"draft_n": 5, "draft_n_accepted": 9, "predicted_n": 20}}',
    "timings with a string": '{"timings": {"draft_n": "5", "draft_n_accepted": 1, "predicted_n": 20}}',
    "a log line cut short": "SpecDecoding metrics: Mean acceptance length: 2.00",
    "a log line with rising rates": ("SpecDecoding metrics: Mean acceptance length: 1.60, Accepted: 60 tokens, Drafted: "
                                     "200 tokens, Per-position acceptance rate: 0.200, 0.400, Avg Draft acceptance rate: 30.0%"),
    "an impossible accept length": 'sglang:spec_accept_length{model_name="x"} 0.2\n',
    "deep JSON": "[" * 5000 + "]" * 5000,
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_files_get_one_line(name):
    with pytest.raises(ExplorerError) as err:
        whatif.read(BAD[name], gamma=4 if "accept length" in name else None)
    message = str(err.value)
    assert "\n" not in message and 10 < len(message) <= 300, message
    assert "Traceback" not in message and "prometheus_client" not in message


def test_bad_bytes_and_sizes_get_one_line():
    for data, words in ((b"\xff\xfe\x00garbage", "not UTF-8"), (b"#" * (whatif.MAX_METRICS_BYTES + 1), "at most 4 MB"),
                        ("x" * (whatif.MAX_METRICS_BYTES + 1), "at most 4 MB"), (12, "expected the text")):
        with pytest.raises(ExplorerError, match=words):
            whatif.read(data)
    for gamma in (0, 65, True, 2.5):
        with pytest.raises(ExplorerError, match="draft length"):
            whatif.read(BAD["plain words"], gamma=gamma)


@pytest.mark.parametrize("args", [
    ["--metrics", "/nonexistent/metrics.txt"],
    ["--metrics", "{example}", "--draft-cost", "nan"],
    ["--metrics", "{example}", "--draft-cost", "-1"],
    ["--metrics", "{example}", "--verify-cost", "1,abc"],
    ["--metrics", "{example}", "--gamma", "x"],
    ["--metrics", "{bad}"],
    [],
])
def test_bad_cli_calls_exit_2_with_one_line(args, capsys, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text(BAD["a later position accepted more"])
    args = [a.format(example=EXAMPLE, bad=bad) for a in args]
    try:
        status = main(["whatif", *args])
    except SystemExit as exit:  # argparse's own refusals
        status = exit.code
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error:") and len(err) <= 300, err


def test_the_chart_escapes_names_and_marks_the_best_gamma():
    text = vllm_metrics({('<img src=x onerror=alert(1)>', "0"): [80, 40]}, {('<img src=x onerror=alert(1)>', "0"): 100})
    results = [whatif.analyse(d, 0.05) for d in whatif.read(text)]
    fig = whatif_figure(results)
    dumped = fig.to_json()
    assert "<img" not in dumped and "&lt;img" in dumped
    stars = [t for t in fig.data if t.name and t.name.startswith("best γ")]
    assert len(stars) == 1 and stars[0].x[0] == results[0]["best_gamma"]
    assert fig.layout.xaxis2.title.text.startswith("γ") and "speed-up" in fig.layout.yaxis2.title.text
    assert not math.isnan(results[0]["iid_alpha"])


def test_verify_cost_measured_on_this_machine(capsys):
    assert main(["whatif", "--metrics", str(EXAMPLE), "--verify-cost", "measure", "--model", "tiny-random:1",
                 "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    (result,) = report["drafters"]
    assert len(result["verify_cost"]) == 6 and result["verify_cost"][0] == 1 and not result["verify_cost_flat"]
    assert all(b >= a for a, b in zip(result["verify_cost"], result["verify_cost"][1:]))  # never cheaper with more
    assert "tiny-random:1" in report["verify_cost_measured_on"] and "cores" in report["verify_cost_measured_on"]
    assert "measuring T(n)" in captured.err  # progress on stderr, the JSON alone on stdout


def _report_with(verify_cost_ratio, c=None) -> str:
    report = json.loads(LATEST_BENCH.read_text())
    report["meta"]["verify_cost_ratio"] = verify_cost_ratio
    for row in report["rows"]:
        if c is not None and row.get("acceptance_by_position"):
            row["c"] = c
    return json.dumps(report)


VLLM_V1 = ("SpecDecoding metrics: Mean acceptance length: {length}, Accepted: 10 tokens, Drafted: 40 tokens, "
           "Per-position acceptance rate: 0.500, 0.250, Avg Draft acceptance rate: 25.0%")
# issue 40, item 4: each raised ZeroDivisionError, OverflowError or ValueError (a bare "Error" on the page, a
# traceback from the CLI), or said "≈ -99 target forwards"; each must be refused in one line that names the value
RAISED = {
    "llama.cpp predicted_n 0": ('{"timings": {"draft_n": 5, "draft_n_accepted": 0, "predicted_n": 0}}', "none generated"),
    "a report's verify cost [0]": (_report_with([0]), "verify_cost_ratio"),
    "a report's verify cost [1, 0.5] with c 0": (_report_with([1, 0.5], c=0), "verify_cost_ratio"),
    "SGLang 1e300 at a rate of 1e-300": ('sglang:spec_accept_length{model_name="x"} 1e300\n'
                                         'sglang:spec_accept_rate{model_name="x"} 1e-300\n', "accept length"),
    "a tiny SGLang rate": ('sglang:spec_accept_length{model_name="x"} 60\nsglang:spec_accept_rate{model_name="x"} '
                           '1e-300\n', "more than 64 tokens"),
    "a 4 000-digit draft_n": ('{"timings": {"draft_n": ' + "9" * 4000 + ', "draft_n_accepted": 0, "predicted_n": 5}}',
                              "4000 digits"),
    "accept len: 1.2.3": ("[2026-11-25] Decode batch. accept len: 1.2.3, gen throughput: 90", "1.2.3"),
    "Mean acceptance length: e": (VLLM_V1.format(length="e"), "Mean acceptance length must be a number"),
    "a pooled negative count": ('[{"timings": {"draft_n": 100, "draft_n_accepted": 99, "predicted_n": 0}}]',
                                "inconsistent counts"),
}


@pytest.mark.parametrize("name", list(RAISED))
def test_what_used_to_raise_is_refused_in_one_line(name):
    text, words = RAISED[name]
    with pytest.raises(ExplorerError) as err:
        whatif.analyse_all(whatif.read(text, gamma=None), None, None)
    message = str(err.value)
    assert words in message and "\n" not in message and len(message) <= 300, message
    assert "≈ -" not in message  # no negative count of forwards


@pytest.mark.parametrize("name", list(RAISED))
def test_what_used_to_raise_exits_2_from_the_cli(name, capsys, tmp_path):
    path = tmp_path / "metrics.txt"
    path.write_text(RAISED[name][0])
    assert main(["whatif", "--metrics", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and err.count("\n") == 0 and RAISED[name][1] in err, err


@pytest.mark.parametrize("name", list(RAISED))
def test_what_used_to_raise_gets_one_line_on_the_page(name):
    from explorer.ui import whatif as page

    plot, words = page.analyse_inputs(RAISED[name][0], None, "", "", "", False, False, "**before**", None)
    assert words.startswith("⚠️") and "before" in words  # the reason, then the earlier analysis' words
    reason = words.split(page.WARNING_END)[0].replace("\\", "")  # Markdown's escapes dropped
    assert "\n" not in reason and len(reason) <= 320, reason
    assert RAISED[name][1].split()[0] in reason, reason  # the parser's own reason, not "something went wrong"
