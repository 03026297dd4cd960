"""The 4-bit copy's one-token step in one call (``q4_vnni.cpp``'s ``step``, #49): every layer of a drafting step
in one C++ loop instead of a compiled call a layer. It must compute the copy's own function (the same 4-bit
weights, the same bfloat16 roundings as the layers run one by one), write the KV cache the next forward reads,
and step aside where it does not apply."""

import copy as copying
import re

import pytest
import torch

import explorer
from explorer.engine import compiled, lowbit
from explorer.engine.cache import new_cache
from explorer.methods.quantized.lowbit_copy import lowbit_copy

PROMPT, STEPS, AFTER = 8, 16, 4  # a prompt's rows in one forward, then one-token steps, then a few rows again


@pytest.fixture(scope="module")
def tiny_copy():
    target = explorer.load("tiny-random:1")
    made = lowbit_copy(target, "int4")
    if not made.decoder.whole_step():
        pytest.skip("the one-call step needs the VNNI int4 kernel (AVX-512 VNNI and a C++ compiler)")
    return target, made.decoder


def oracle_states(target, ids: torch.Tensor) -> torch.Tensor:
    """The copy's function without its roundings: the target with every layer's weights on the copy's 4-bit grid
    (``Int4Blocks.rounded``, as the copy is made from float weights), run by transformers in float32; its final
    normed states (T, H)."""
    model = copying.deepcopy(target.model)
    with torch.no_grad():
        for layer in model.model.layers:
            for linear in (*(getattr(layer.self_attn, n) for n in ("q_proj", "k_proj", "v_proj", "o_proj")),
                           *(getattr(layer.mlp, n) for n in ("gate_proj", "up_proj", "down_proj"))):
                linear.weight.copy_(lowbit.Int4Blocks.rounded(linear.weight).dense())
        return model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0]


def run(decoder, ids: torch.Tensor, monkeypatch, whole: bool) -> tuple[torch.Tensor, int]:
    """The decoder over ``ids`` as a draft runs it (a prompt in one forward, one-token steps, a few rows in one
    forward): the final normed states of every position after the prompt, and how many calls the step took."""
    monkeypatch.setenv("EXPLORER_WHOLE_STEP", "1" if whole else "0")
    calls, states = [], []
    step = torch.ops.explorer_q4.step
    monkeypatch.setattr(torch.ops.explorer_q4, "step", lambda *a: calls.append(1) or step(*a))
    hook = decoder.head.register_forward_hook(lambda module, args, out: states.append(args[0].float()))
    cache = new_cache()
    try:
        with torch.inference_mode():
            decoder(ids[:, :PROMPT], cache, 1)
            for i in range(PROMPT, PROMPT + STEPS):
                decoder(ids[:, i:i + 1], cache, 1)
            decoder(ids[:, PROMPT + STEPS:], cache, AFTER)
    finally:
        hook.remove()
    return torch.cat(states[1:]), len(calls)  # (STEPS + AFTER, H)


def test_a_one_token_step_is_one_call_computing_the_copys_layers(tiny_copy, monkeypatch):
    target, decoder = tiny_copy
    ids = torch.randint(0, target.model.config.vocab_size, (1, PROMPT + STEPS + AFTER),
                        generator=torch.Generator().manual_seed(0))
    truth = oracle_states(target, ids)[PROMPT:]
    whole, calls = run(decoder, ids, monkeypatch, whole=True)
    layers, none = run(decoder, ids, monkeypatch, whole=False)
    assert calls == STEPS and none == 0  # one call a one-token step; none for a prompt's or a verification's rows
    error = (whole - truth).abs().amax(-1)  # per position: the one-call steps, then the rows read their KV cache
    reference = (layers - truth).abs().amax(-1)
    scale = truth.abs().amax()
    print(f"max error / max state: one call {float(error.max() / scale):.4f}, layer by layer "
          f"{float(reference.max() / scale):.4f}")
    # both round to bfloat16 (≈ 0.4 % a value) through every layer; a wrong rotary, mask or cache position is
    # off by the states' own size
    assert float(error.max()) <= 2 * float(reference.max()) + 0.02 * float(scale)
    assert float(error[STEPS:].max()) <= 2 * float(reference[STEPS:].max()) + 0.02 * float(scale)


def test_the_step_steps_aside_where_it_does_not_apply(tiny_copy, monkeypatch):
    """Switched off (``EXPLORER_WHOLE_STEP=0``), inside ``compiled.eager()`` (the profile's eager timing), or for
    a batch of rows, the layers run one by one; the copy's line says which runs."""
    target, decoder = tiny_copy
    calls = []
    step = torch.ops.explorer_q4.step
    monkeypatch.setattr(torch.ops.explorer_q4, "step", lambda *a: calls.append(1) or step(*a))
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.inference_mode():
        cache = new_cache()
        decoder(ids[:, :4], cache, 1)
        with compiled.eager():
            decoder(ids[:, 4:], cache, 1)
        monkeypatch.setenv("EXPLORER_WHOLE_STEP", "0")
        assert not decoder.whole_step()
        decoder(ids[:, 4:], new_cache(), 1)
    assert calls == []
    monkeypatch.setenv("EXPLORER_WHOLE_STEP", "1")
    assert "every layer in one call" in lowbit_copy(target, "int4").about()


def test_the_profile_times_the_one_call_step_beside_the_layers_one_by_one(tiny_copy):
    """`explorer profile --draft int4` weighs the step against its bytes, and where the step is one call it times the
    layers one by one at the same moments (interleaved) and prints both against the same floor."""
    from explorer.profile import draft_step, draft_words

    target, _ = tiny_copy
    step = draft_step(target, "int4", context=16, repeats=3)
    assert step["step_s"] > 0 and step["layers_s"] > 0
    floor = step["bytes"] / step["bandwidth"]
    said = draft_words("int4", step)
    if step["step_s"] >= floor:  # else the line says no ratio can be shown (a busy spell), tested in test_cli.py
        layers, ratio = (float(x) for x in re.search(r"the layers one by one: ([\d.]+) ms, ([\d.]+)× its bytes",
                                                     said).groups())
        assert abs(layers - step["layers_s"] * 1e3) < 0.01 and abs(ratio - step["layers_s"] / floor) / ratio < 0.01


def test_a_layer_by_layer_time_under_the_floor_gets_no_ratio():
    """A busy spell can leave the layers' timing under the bytes' floor while the step's is over it: the time is
    shown, no ratio that cannot be."""
    from explorer.profile import draft_words

    said = draft_words("int4", {"step_s": 0.004, "layers_s": 0.001, "bytes": 84e6, "bandwidth": 30e9})
    assert "the step is 1.43× its bytes" in said and "the layers one by one: 1.00 ms)" in said
    assert said.count("× its bytes") == 1
