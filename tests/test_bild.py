"""BiLD: its two limits, the trade-off's direction on the real model, and events consistent with the text."""

import math

import pytest

import explorer
from explorer import quality, sweep
from explorer.trace import check_invariants

PROMPT = "Why is the sky blue?"


def test_zero_rollback_threshold_is_the_large_models_greedy_output(default_model, tiny_target, tiny_draft):
    for model, small, prompt in ((default_model, "early-exit:6", PROMPT), (tiny_target, tiny_draft, "the cat")):
        large = explorer.decode(model, prompt, method="ar", max_new_tokens=32)
        for fb in (0.2, 0.9):
            t = explorer.decode(model, prompt, method="bild", draft=small, fallback_threshold=fb,
                                rollback_threshold=0.0, max_new_tokens=32)
            assert t.output_ids == large.output_ids


def test_no_fallback_no_rollback_is_the_small_models_greedy_output(tiny_target, tiny_draft):
    small = explorer.decode(tiny_draft, "the cat", method="ar", max_new_tokens=30)
    t = explorer.decode(tiny_target, "the cat", method="bild", draft=tiny_draft, fallback_threshold=0.0,
                        rollback_threshold=math.inf, max_small_steps=64, max_new_tokens=30)
    assert t.output_ids == small.output_ids
    assert t.summary.target_forwards == 0  # the large model never ran
    short_turns = explorer.decode(tiny_target, "the cat", method="bild", draft=tiny_draft, fallback_threshold=0.0,
                                  rollback_threshold=None, max_small_steps=4, max_new_tokens=30)
    assert short_turns.output_ids != small.output_ids  # the large model adds a token after each turn
    assert short_turns.summary.new_tokens == 30  # and a summary over rounds of every kind still adds up
    capped = explorer.decode(tiny_target, "the cat", method="bild", draft=tiny_draft, fallback_threshold=0.0,
                             rollback_threshold=None, max_small_steps=64, max_new_tokens=30)
    assert capped.summary.c_measured is None


def test_events_are_consistent_with_the_text(default_model):
    t = explorer.decode(default_model, PROMPT, method="bild", draft="early-exit:8", fallback_threshold=0.5,
                        rollback_threshold=3.0, max_new_tokens=40)
    assert check_invariants(t) == []  # the rounds' emitted tokens rebuild output_ids
    rebuilt = list(t.prompt_ids)
    for r in t.rounds:
        assert r.context_len == len(rebuilt)
        rb = r.detail["rollback"]
        if r.event == "rollback":
            m = rb["position"]
            assert rb["replaced"] == r.drafted[m] != rb["replacement"] == r.emitted[m]
            assert rb["flushed"] == len(r.drafted) - m and rb["distance"] > 3.0
            assert r.emitted_kind[-1] == "corrected"
        else:
            assert r.event == "fallback" and rb is None and r.n_accepted == len(r.drafted)
            if r.detail["reason"] == "confidence":
                assert r.detail["small_max_prob"] < 0.5
        rebuilt += r.emitted
    assert rebuilt[len(t.prompt_ids):] == list(t.output_ids)
    assert {"fallback", "rollback"} <= {r.event for r in t.rounds}
    assert explorer.load_trace(t.to_json()) == t
    # a rollback refuses a small token: α̂ counts it as tested (it read 1.0 when only "rejected" counted)
    rollbacks = sum(r.event == "rollback" for r in t.rounds)
    assert t.summary.alpha_hat == pytest.approx(t.summary.accepted / (t.summary.accepted + rollbacks))
    assert t.summary.alpha_hat < 1.0


def test_sweep_trades_quality_for_cost_in_the_papers_direction(default_model):
    report = sweep.run("bild", "default", "early-exit:8", {"fallbacks": (0.1, 0.9), "rollbacks": (0.5, 20.0)},
                       max_new_tokens=24, prompts=[PROMPT, "Name three primary colours."], progress=lambda *_: None)
    point = {(p["fallback_threshold"], p["rollback_threshold"]): p for p in report["points"]}
    # fewer large-model forwards as α_FB falls
    for rb in (0.5, 20.0):
        assert point[(0.1, rb)]["large_forwards_per_token"] < point[(0.9, rb)]["large_forwards_per_token"]
    # higher agreement with the large model as α_RB falls
    for fb in (0.1, 0.9):
        assert point[(fb, 0.5)]["agreement"] >= point[(fb, 20.0)]["agreement"]
    assert point[(0.1, 0.5)]["agreement"] > point[(0.1, 20.0)]["agreement"]
    assert any(p["pareto"] for p in report["points"])
    assert all(p["doubt"] is None or "the machine was busy" in p["doubt"] for p in report["points"])  # #48


def test_quality_measures():
    assert quality.compare([1, 2, 3], [1, 2, 3]) == {"agreement": 1.0, "rouge_l": 1.0, "first_divergence": None}
    assert quality.first_divergence([1, 9, 3], [1, 2, 3]) == 1
    assert quality.token_agreement([1, 9, 3], [1, 2, 3]) == pytest.approx(2 / 3)
    assert quality.rouge_l([1, 2, 3, 4], [1, 3, 4, 5]) == pytest.approx(0.75)  # LCS 1 3 4


@pytest.mark.parametrize("kwargs,message", [
    (dict(fallback_threshold=1.5), "α_FB"), (dict(rollback_threshold=-1), "α_RB"),
    (dict(max_small_steps=0), "max_small_steps"), (dict(draft="prompt-lookup:2"), "must give distributions"),
    (dict(draft=None), "needs a draft"),
])
def test_bad_bild_settings(tiny_target, tiny_draft, kwargs, message):
    args = dict(method="bild", draft=tiny_draft, max_new_tokens=4) | kwargs
    with pytest.raises(explorer.ExplorerError, match=message):
        explorer.decode(tiny_target, "ab", **args)


def test_the_targets_own_4_bit_copy_is_a_small_model_bild_can_run(tiny_target):
    """Any draft that gives distributions serves BiLD: with no fallback and no rollback its output is the 4-bit copy's
    own greedy text (quantized with role alone); with a zero rollback threshold, the target's."""
    alone = explorer.decode(tiny_target, "the cat", method="quantized", draft="int4", quantized_role="alone",
                            max_new_tokens=24)
    small = explorer.decode(tiny_target, "the cat", method="bild", draft="int4", fallback_threshold=0.0,
                            rollback_threshold=math.inf, max_small_steps=64, max_new_tokens=24)
    assert small.output_ids == alone.output_ids and small.summary.target_forwards == 0
    large = explorer.decode(tiny_target, "the cat", method="ar", max_new_tokens=24)
    exact = explorer.decode(tiny_target, "the cat", method="bild", draft="int4", fallback_threshold=0.5,
                            rollback_threshold=0.0, max_new_tokens=24)
    assert exact.output_ids == large.output_ids
