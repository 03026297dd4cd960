"""Issue 51, item 2: one temperature rule for every surface (Python API, CLI, the app's /decode, which MCP calls,
and the page's handlers), and no sampler ever handed a distribution that is not one.

Before: ``temperature=1e-300`` (or 1e-45) reached ``warp``, whose logits / T overflowed (1e-45 is 0 in float32), so
``torch.multinomial`` raised "probability tensor contains either inf, nan or element < 0": the API answered
"something went wrong on the server" and the CLI printed a traceback and exited 1."""

from __future__ import annotations

import math
import sys

import pytest
import torch

import explorer
from explorer.engine.sampling import SamplingConfig, choose, sample, warp
from explorer.errors import ExplorerError
from explorer.limits import MAX_TEMPERATURE, MIN_TEMPERATURE, check_temperature
from helpers import run_cli

# tiny positive ones (below the minimum: 1e-45 is float32's smallest subnormal, 5e-324 float64's), the largest float,
# the infinities, NaN and a negative: each refused in one line
BAD = [1e-300, 1e-45, 5e-324, 1.4e-45, 2.2250738585072014e-308 / 2, 1e-30, MIN_TEMPERATURE / 2, sys.float_info.max,
       math.inf, -math.inf, math.nan, -1e-300, -1.0, MAX_TEMPERATURE * 1.0001]
GOOD = [0, 0.0, MIN_TEMPERATURE, 0.7, 1, MAX_TEMPERATURE]


def one_line(message: str) -> None:
    assert "\n" not in message.strip() and len(message) <= 300 and "Traceback" not in message, message


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_the_rule_refuses_in_one_line_naming_the_range(value):
    with pytest.raises(ExplorerError) as refused:
        SamplingConfig(value)
    one_line(str(refused.value))
    assert f"0 (greedy) or from {MIN_TEMPERATURE:g} to {MAX_TEMPERATURE:g}" in str(refused.value)
    if 0 < value < MIN_TEMPERATURE:
        assert "use 0" in str(refused.value)  # what the visitor meant: greedy


@pytest.mark.parametrize("value", GOOD, ids=repr)
def test_the_rule_admits_greedy_and_the_stated_range(value):
    assert check_temperature(value) == float(value)


def test_the_rule_refuses_what_is_not_a_number():
    for value in (True, "0.5", None, [1.0]):
        with pytest.raises(ExplorerError):
            check_temperature(value)


def test_at_the_minimum_the_warp_is_finite_even_for_huge_logits():
    """The minimum keeps logits / T finite for any float32 logit a model gives (±1e4 here ×100 = 1e6)."""
    logits = torch.tensor([[1e4, -1e4, 0.0, 3.0], [0.0, 0.0, 0.0, 0.0]])
    probs = warp(logits, SamplingConfig(MIN_TEMPERATURE, top_p=0.9))
    assert torch.isfinite(probs).all() and torch.allclose(probs.sum(-1), torch.ones(2))
    assert choose(probs[0], SamplingConfig(MIN_TEMPERATURE), torch.Generator().manual_seed(0)) == 0


@pytest.mark.parametrize("row", [[math.nan, 0.5, 0.5], [math.inf, 0.0, 0.0], [0.0, 0.0, 0.0], [-0.5, 1.0, 0.5]],
                         ids=["nan", "inf", "zero", "negative"])
def test_the_sampler_refuses_a_row_that_is_not_a_distribution_in_one_line(row):
    """What an overflowing model's logits would give: refused before torch.multinomial raises its RuntimeError."""
    with pytest.raises(ExplorerError) as refused:
        sample(torch.tensor(row), torch.Generator().manual_seed(0))
    one_line(str(refused.value))


@pytest.mark.parametrize("method, keywords", [
    ("ar", {}), ("speculative", {"draft": "model:tiny-random:2:1"}), ("quantized", {"draft": "int4"}),
    ("quantized", {"draft": "int8"}), ("quantized", {"draft": "int4", "quantized_role": "alone"}),
    ("bild", {"draft": "model:tiny-random:2:1"}), ("lenient", {"draft": "prompt-lookup:2"}),
])
@pytest.mark.parametrize("value", [1e-300, 1e-45, 5e-324], ids=repr)
def test_every_method_refuses_a_tiny_temperature_through_the_api(method, keywords, value):
    with pytest.raises(ExplorerError) as refused:
        explorer.decode("tiny-random:1", "abc abc", method=method, temperature=value, max_new_tokens=3, **keywords)
    assert "temperature must be 0 (greedy)" in str(refused.value)


@pytest.mark.parametrize("value", ["1e-300", "1e-45", "5e-324", "1.7976931348623157e308", "inf", "nan"])
def test_the_cli_refuses_with_exit_2_and_one_line(value):
    done = run_cli("run", "--model", "tiny-random:1", "--prompt", "abc abc", "--method", "quantized", "--draft", "int4",
                   "--max-new-tokens", "3", "--temperature", value)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: temperature must be 0 (greedy)") and "Traceback" not in done.stderr
    one_line(done.stderr)


def test_the_sampling_audit_refuses_a_tiny_temperature_before_any_run():
    from explorer.audit import sampling_audit

    runs = []
    with pytest.raises(ExplorerError, match="temperature must be 0"):
        sampling_audit("tiny-random:1", "abc", runs=10, temperature=1e-300, progress=lambda *a: runs.append(a))
    assert runs == []
    done = run_cli("audit", "--model", "tiny-random:1", "--prompt", "abc", "--runs", "10", "--temperature", "1e-45")
    assert done.returncode == 2 and "temperature must be" in done.stderr and "Traceback" not in done.stderr


def test_the_apps_decode_handler_answers_the_rule_not_a_server_failure():
    """/decode (Gradio's API, and MCP's tool, which calls the same handler): the rule's own line as gr.Error."""
    from types import SimpleNamespace

    import gradio as gr

    from explorer.ui.api_handlers import ApiDecode

    for value in (1e-300, 1e-45, "1e-300"):
        with pytest.raises(gr.Error) as refused:
            list(ApiDecode().api_decode("abc", method="quantized", draft="int4", temperature=value, max_new_tokens=3,
                                        model="tiny-random:1", request=SimpleNamespace(session_hash="t51")))
        assert "temperature must be 0 (greedy)" in refused.value.message, refused.value.message
