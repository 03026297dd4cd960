"""The Python API: streaming, stopping half way, and every bad input reaching a clear message."""

import itertools

import pytest

import explorer
from explorer.trace import check_invariants


def test_stream_yields_rounds_and_a_stopped_run_is_a_usable_trace(tiny_target, tiny_draft):
    decoding = explorer.stream(tiny_target, "the cat", draft=tiny_draft, temperature=1.0, max_new_tokens=50, seed=2)
    first = list(itertools.islice(decoding, 3))
    assert [r.index for r in first] == [0, 1, 2]
    partial = decoding.trace()
    assert partial.summary.stop_reason == "stopped" and partial.summary.rounds == 3
    assert check_invariants(partial) == []
    assert explorer.load_trace(partial.to_json()) == partial


def test_decode_equals_a_consumed_stream(tiny_target, tiny_draft):
    kwargs = dict(draft=tiny_draft, temperature=1.0, max_new_tokens=20, seed=3)
    decoding = explorer.stream(tiny_target, "abc", **kwargs)
    rounds = list(decoding)
    trace = explorer.decode(tiny_target, "abc", **kwargs)
    assert trace.output_ids == decoding.trace().output_ids and len(rounds) == trace.summary.rounds
    assert trace.summary.stop_reason == "max_new_tokens"


def test_eos_stops_the_run(default_model):
    trace = explorer.decode(default_model, "Say only the word yes.", draft="prompt-lookup:3", max_new_tokens=64)
    assert trace.summary.stop_reason == "eos" and trace.output_ids[-1] in default_model.eos_token_ids


def test_method_defaults_follow_the_draft(tiny_target):
    assert explorer.decode(tiny_target, "ab", max_new_tokens=3).method == "ar"
    assert explorer.decode(tiny_target, "ab", draft="prompt-lookup:1", max_new_tokens=3).method == "speculative"


@pytest.mark.parametrize("kwargs,message", [
    (dict(prompt=""), "prompt is empty"),
    (dict(prompt="   "), "prompt is empty"),
    (dict(prompt="ab", prompt_ids=[1]), "either a prompt or prompt_ids"),
    (dict(prompt_ids=[1, 999]), "outside the vocabulary"),
    (dict(prompt_ids=[]), "no tokens"),
    (dict(prompt="ab", method="magic"), "unknown method"),
    (dict(prompt="ab", method="speculative"), "needs a draft"),
    (dict(prompt="ab", draft="telepathy:3"), "unknown draft"),
    (dict(prompt="ab", draft="prompt-lookup:0"), "whole number >= 1"),
    (dict(prompt="ab", draft="early-exit:2"), r"1 <= N < 2"),
    (dict(prompt="ab", draft="model:default"), "different vocabularies"),
    (dict(prompt="ab", draft="prompt-lookup:2", gamma=0), "gamma"),
    (dict(prompt="ab", draft="prompt-lookup:2", controller="psychic"), "unknown controller"),
    (dict(prompt="ab", max_new_tokens=0), "max_new_tokens"),
    (dict(prompt="ab", max_new_tokens=10**6), "max_new_tokens"),
    (dict(prompt="ab", seed=-1), "seed"),
    (dict(prompt="ab", temperature=-0.5), "temperature"),
    (dict(prompt="ab", top_p=0.0), "top_p"),
    (dict(prompt="ab" * 600), "exceeds the model's context"),
    (dict(prompt="ab$"), "only know the characters"),
])
def test_bad_inputs_raise_one_clear_error(tiny_target, kwargs, message):
    with pytest.raises(explorer.ExplorerError, match=message):
        explorer.decode(tiny_target, **kwargs)


def test_concurrent_first_loads_share_one_intact_model():
    """The app preloads the default model while a first visitor may ask for it: loads must not race."""
    from concurrent.futures import ThreadPoolExecutor

    from explorer.api import _LOADED, load_cached

    for key in [k for k in _LOADED if k[0] == "tiny-random:9"]:
        del _LOADED[key]
    with ThreadPoolExecutor(4) as pool:
        models = list(pool.map(lambda _: load_cached("tiny-random:9", None, None), range(4)))
    assert all(m is models[0] for m in models)
    assert not any(p.is_meta for p in models[0].model.parameters())
