"""``quantized`` with role alone is plain decoding of the copy: the copy is a model (``CopyModel``, the target's
tokenizer and end tokens with the copy's decoder step), and ``ar`` over it is the run, with no argument of the round
loop's that only this run uses."""

from __future__ import annotations

import inspect

import explorer
from explorer.engine.cache import CachedForward
from explorer.engine.speculative import SpeculativeStep, decode_rounds
from explorer.methods.quantized.lowbit_copy import CopyModel, lowbit_copy
from explorer.methods.speculative import run_speculative


def test_the_round_loop_takes_no_runner_of_its_own():
    for function in (decode_rounds, SpeculativeStep, run_speculative):
        assert "runner" not in inspect.signature(function).parameters, function.__name__


def test_alone_is_greedy_decoding_of_the_copy_step_by_step(tiny_target):
    prompt = "hello there, how are you"
    run = explorer.decode(tiny_target, prompt, method="quantized", quantized_role="alone", max_new_tokens=10)
    copy = lowbit_copy(tiny_target, "int4")
    model = CopyModel.of(tiny_target, copy)
    assert model.eos_token_ids == tiny_target.eos_token_ids and model.name == tiny_target.name
    runner = CachedForward(model.forward, tiny_target.device)
    ids = list(run.prompt_ids)
    expected = []
    for _ in range(10):  # one forward a token, the copy's argmax each time: what ar over the copy is
        token = int(runner.logits(ids, 1)[0].argmax())
        expected.append(token)
        ids.append(token)
        if token in tiny_target.eos_token_ids:
            break
    assert list(run.output_ids) == expected
    assert run.summary.target_forwards == len(expected) and all(not r.drafted for r in run.rounds)
    assert run.draft == "int4" and "the copy alone, no target checks its text" in run.draft_about
