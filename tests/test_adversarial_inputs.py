"""Every parser of a stranger's text under adversarial lengths (issue 40, item 2): about 4 MB of long runs of
spaces, digits, separators, quotes, backslashes, braces and nesting — and the shorter lines that made the vLLM
log pattern backtrack (2 000 spaces then ``x``: 10 s) — each answered (read, or refused in one line) within a
CPU-time bound far above an honest parse's cost and far below what a backtracking or quadratic parser takes.

Each input runs in a forked child killed past a wall deadline, so a parser that backtracks fails its test
instead of hanging the suite; the child reports its own CPU seconds, which the other engineers' work on this
2-core machine barely moves (a wall clock would)."""

from __future__ import annotations

import json
import multiprocessing
import time

import pytest

import explorer
from explorer import whatif
from explorer.errors import ExplorerError
from explorer.limits import MAX_REPORT_BYTES
from explorer.reports import load_bench_report
from explorer.untrusted import Refused, check_plain, parse

# CPU seconds any one input may cost: honest 4 MB inputs cost 0.06–0.22 s here and the worst 0.43 (2026-11-27; What
# if's /metrics parser took 2.24 before issue 51), so a host half as fast keeps well within it
BOUND_S = 1.5
DEADLINE_S = 40.0  # wall seconds before the child is killed (the old vLLM pattern: 4 000 spaces ≈ 80 s)
SIZE = 4 * 2**20 - 4096  # just under What if's 4 MB, so every input is parsed rather than refused for its size
VLLM_HEAD = ("INFO 11-25 10:00:00 [metrics.py:86] SpecDecoding metrics: Mean acceptance length: 2.90, Accepted: 1900 "
             "tokens, Drafted: 5000 tokens, Per-position acceptance rate:")
VLLM_LINE = VLLM_HEAD + " 0.800, 0.560, 0.330, 0.150, 0.060, Avg Draft acceptance rate: 38.0%"


def fill(unit: str, size: int = SIZE) -> str:
    return unit * (size // len(unit))


def lines(line: str, size: int = SIZE) -> str:
    return fill(line + "\n", size)


def labels_line(n: int) -> str:
    return "vllm:spec_decode_num_drafts_total{" + ",".join(f'a{i}=""' for i in range(n)) + "} 1.0"


def trace_text(**changes) -> str:
    data = json.loads(explorer.decode("tiny-random:1", "abc", max_new_tokens=4).to_json())
    data.update(changes)
    return json.dumps(data)


# name → (parser, a function that builds the input); each parser is the entry point a stranger's text reaches
WHATIF = {
    "vLLM log: the rates then 4 MB of spaces and x": lambda: VLLM_HEAD + fill(" ") + "x",
    "vLLM log: the rates then 2 000 spaces and x (10 s before)": lambda: VLLM_HEAD + " " * 1900 + "x",
    "vLLM log: 2 000 spaces and x on every line": lambda: lines(VLLM_HEAD + " " * 1800 + "x"),
    "vLLM log: every rate padded with 1 800 spaces": lambda: lines(VLLM_HEAD + " 0.8," + " " * 1800
                                                                  + "0.5, Avg Draft acceptance rate: 38.0%"),
    "vLLM log: a run of commas": lambda: VLLM_HEAD + fill(","),
    "vLLM log: a run of digits": lambda: VLLM_HEAD.replace("2.90", fill("9")),
    "vLLM log: a run of exponents": lambda: VLLM_HEAD + fill("e") + " , Avg",
    "vLLM log: 4 MB of honest lines": lambda: lines(VLLM_LINE),
    "vLLM v0 log: spaces": lambda: "Speculative metrics: Number of speculative tokens:" + fill(" ") + "x",
    "SGLang log: spaces": lambda: "accept len:" + fill(" ") + "x",
    "SGLang log: digits and dots": lambda: "accept len: " + fill("1.") + "\n",
    "SGLang log: 4 MB of lines": lambda: lines("[2026-11-25] Decode batch. accept len: 2.31, gen throughput: 90"),
    "Prometheus: one 4 MB line of labels": lambda: labels_line(SIZE // 11),
    "Prometheus: 2 000-character lines of labels": lambda: lines(labels_line(220)),
    "Prometheus: a label value of escaped quotes": lambda: 'vllm:spec_decode_num_drafts_total{a="' + fill('\\"')
                                                          + '"} 1.0',
    "Prometheus: lines of escaped quotes": lambda: lines('vllm:spec_decode_num_drafts_total{a="' + '\\"' * 900
                                                         + '"} 1.0'),
    "Prometheus: backslashes": lambda: 'vllm:spec_decode_num_drafts_total{a="' + fill("\\\\") + '"} 1.0',
    "Prometheus: braces": lambda: "vllm:spec_decode_num_drafts_total" + fill("{"),
    "Prometheus: spaces before the value": lambda: "vllm:spec_decode_num_drafts_total" + fill(" ") + "1.0",
    "Prometheus: a long value": lambda: "vllm:spec_decode_num_drafts_total " + fill("9"),
    "Prometheus: 4 MB of honest samples": lambda: "".join(
        f'vllm:spec_decode_num_drafts_total{{engine="{i % 8}",model_name="m"}} 10.0\n' for i in range(SIZE // 72)),
    "llama.cpp JSON: 48 000 responses": lambda: json.dumps(
        [{"model": "m", "timings": {"draft_n": 5, "draft_n_accepted": 2, "predicted_n": 9}}] * (SIZE // 86)),
    "JSON: nested 2 M levels": lambda: "[" * (SIZE // 2) + "]" * (SIZE // 2),
    "JSON: a 4 MB string": lambda: json.dumps({"timings": fill("x")}),
    "JSON: 4 000-digit numbers": lambda: "[" + ",".join(["9" * 4000] * (SIZE // 4001)) + "]",
    "JSON: a trace of 4 MB of empty rounds": lambda: '{"rounds": [' + fill("{},") + "{}]}",
    "JSON: a report of 4 MB of rows": lambda: '{"rows": [' + fill("{},") + "{}]}",
}


def report_text() -> str:
    """The shipped benchmark report with as many rows of 900-character names as fit its 1 MB."""
    from explorer.ui.sections import LATEST_BENCH

    report = json.loads(LATEST_BENCH.read_text())
    row = dict(report["rows"][-1], system="s" * 900)
    report["rows"] = [row] * min(256, MAX_REPORT_BYTES // (len(json.dumps(row)) + 2) - 2)
    return json.dumps(report)


def nested_detail() -> str:
    data = json.loads(trace_text())
    data["rounds"][0]["detail"] = "NEST"
    return json.dumps(data).replace('"NEST"', fill("[", SIZE // 2) + fill("]", SIZE // 2))


READERS = {
    "load_trace: a 4 MB prompt of spaces": (explorer.load_trace, lambda: trace_text(prompt=fill(" "))),
    "load_trace: 4 MB of rounds": (explorer.load_trace, lambda: trace_text(rounds=[{}] * (SIZE // 4))),
    "load_trace: 4 MB of nesting in a round's detail": (explorer.load_trace, nested_detail),
    "load_trace: a million token ids": (explorer.load_trace, lambda: trace_text(output_ids=[5] * (SIZE // 3))),
    "load_trace: 4 MB of token text keys": (explorer.load_trace, lambda: trace_text(
        token_text={str(i): " " * 20 for i in range(SIZE // 30)})),
    "load_bench_report: 4 MB": (load_bench_report, lambda: '{"rows": [' + fill("{},") + "{}]}"),
    "load_bench_report: 1 MB of long rows": (load_bench_report, report_text),
    "untrusted.parse + check_plain: 4 MB of numbers": (
        lambda text: check_plain(parse(text, 2 * SIZE), "x", 4096, 32, 1000), lambda: "[" + fill("1e308,") + "1]"),
    "untrusted.parse: 4 MB of nesting": (lambda text: parse(text, 2 * SIZE), lambda: fill("[")),
    "What if's verify cost: 4 MB of commas": (whatif.parse_verify_cost, lambda: fill(",")),
    "What if's draft cost: 4 MB of digits": (whatif.check_draft_cost, lambda: fill("9")),
    "the theory lab's numbers: 4 MB": (lambda text: __import__("explorer.ui.sections", fromlist=["x"]).parse_numbers(
        text, "α"), lambda: fill("1,")),
    "the race's lanes: 4 MB of digits": (lambda text: __import__("explorer.race", fromlist=["x"]).parse_lanes(
        [text]), lambda: "hf-beam:" + fill("1")),
    "the race's lanes: a 4 MB γ": (lambda text: __import__("explorer.race", fromlist=["x"]).parse_lanes([text]),
                                  lambda: "speculative:prompt-lookup:2@" + fill("1")),
    "a model spec of 4 MB": (lambda text: explorer.load(text), lambda: "hf:" + fill("a")),
}


def cost(parse_text, text: str) -> tuple[float, str]:
    """(CPU seconds, outcome) of ``parse_text(text)`` in a forked child, killed past ``DEADLINE_S``."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child():
        start = time.process_time()
        try:
            parse_text(text)
            outcome = "read"
        except (ExplorerError, Refused) as err:
            outcome = "refused: " + str(err)
        except BaseException as err:  # noqa: BLE001 (what the parent reports as a failure)
            outcome = f"raised {type(err).__name__}: {str(err)[:200]}"
        send.send((time.process_time() - start, outcome))

    process = context.Process(target=child, daemon=True)
    process.start()
    try:
        if not receive.poll(DEADLINE_S):
            return float("inf"), f"still parsing after {DEADLINE_S:.0f} s (killed)"
        return receive.recv()
    finally:
        process.kill()
        process.join()


def check(parse_text, text: str) -> None:
    seconds, outcome = cost(parse_text, text)
    assert not outcome.startswith(("raised", "still")), outcome
    if outcome.startswith("refused"):
        assert "\n" not in outcome and len(outcome) <= 320 and "Traceback" not in outcome, outcome
    assert seconds < BOUND_S, f"{seconds:.2f} CPU s: {outcome[:200]}"


@pytest.mark.parametrize("name", list(WHATIF))
def test_what_if_answers_adversarial_lengths_quickly(name):
    text = WHATIF[name]()
    assert len(text.encode()) <= whatif.MAX_METRICS_BYTES
    check(whatif.read, text)


@pytest.mark.parametrize("name", list(READERS))
def test_every_reader_of_a_strangers_text_answers_adversarial_lengths_quickly(name):
    parse_text, build = READERS[name]
    check(parse_text, build())
