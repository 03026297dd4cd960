"""KV caches roll back exactly: after a rejection nothing stale remains, and what is kept equals a
fresh computation (fp32; tolerance 1e-4 on logits, ~1e-6 of their scale)."""

import torch

import explorer
from explorer.engine.cache import CachedForward, common_prefix, crop_cache
from explorer.drafts import make_drafter
from explorer.engine.controllers import Fixed
from explorer.engine.forward import full_forward
from explorer.engine.sampling import Rng, SamplingConfig

TOL = 1e-4


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 3, 4]) == 3
    assert common_prefix([1, 2, 3], [1, 9, 3]) == 1
    assert common_prefix([], [1]) == 0


def test_rollback_after_rejected_drafts_matches_a_fresh_cache(default_model):
    context = default_model.encode("Name a colour.")
    runner = CachedForward(full_forward(default_model.model), default_model.device)
    runner.logits(context + [11, 12, 13, 14], 5)  # verify four drafts that will be "rejected" after the first
    runner.truncate(len(context) + 1)
    assert runner.cached_len == len(context) + 1 == len(runner.ids)
    kept = runner.logits(context + [11, 99, 98], 3)  # the correction 99 and one more
    fresh = CachedForward(full_forward(default_model.model), default_model.device).logits(context + [11, 99, 98], 3)
    assert (kept - fresh).abs().max() < TOL
    assert runner.cached_len == len(context) + 3


def test_speculative_caches_hold_exactly_the_committed_context(default_model):
    """Run rounds by hand with a separate draft model and check both caches after every commit."""
    drafter = make_drafter("model:default", default_model, lambda spec: default_model)
    target = CachedForward(full_forward(default_model.model), default_model.device)
    context = default_model.encode("Why is the sky blue?")
    cfg, rng, ctrl = SamplingConfig(0.0), Rng(0), Fixed(4)
    for bad in ([], [7], [7, 8]):  # the draft is the target itself: force rejections by editing its drafts
        proposal = drafter.propose(context, 4, cfg, rng, ctrl)
        drafted = proposal.tokens[: 4 - len(bad) - 1] + bad if bad else proposal.tokens
        logits = target.logits(context + drafted, len(drafted) + 1)
        argmax = logits.argmax(-1).tolist()
        n = next((i for i, (d, t) in enumerate(zip(drafted, argmax)) if d != t), len(drafted))
        context = context + drafted[:n] + [argmax[n]]
        target.truncate(len(context) - 1)
        drafter.rollback(context)
        assert target.cached_len == len(context) - 1 and target.ids == context[:-1]
        assert drafter.runner.cached_len == len(drafter.runner.ids)
        assert drafter.runner.ids == context[: len(drafter.runner.ids)]
    # the kept caches give the same next-token logits as a fresh pass over the context
    fresh = CachedForward(full_forward(default_model.model), default_model.device).logits(context, 1)
    assert (target.logits(context, 1) - fresh).abs().max() < TOL
    assert (drafter.runner.logits(context, 1) - fresh).abs().max() < TOL


def test_crop_cache_is_a_no_op_when_short(tiny_target):
    runner = CachedForward(full_forward(tiny_target.model), tiny_target.device)
    runner.logits([1, 2, 3], 1)
    crop_cache(runner.cache, 10)
    assert runner.cached_len == 3
    crop_cache(runner.cache, 1)
    assert runner.cached_len == 1


def test_decoding_leaves_the_model_untouched(default_model):
    config_before = default_model.model.config.to_dict()
    layers_before = len(default_model.model.model.layers)
    weight = default_model.model.model.layers[3].mlp.down_proj.weight
    checksum = float(weight.sum())
    explorer.decode(default_model, "Hi", draft="early-exit:3", max_new_tokens=6)
    assert default_model.model.config.to_dict() == config_before
    assert len(default_model.model.model.layers) == layers_before
    assert float(weight.sum()) == checksum and not weight.requires_grad


def test_growing_layer_appends_in_place_and_survives_crops_and_reassignment():
    """``GrowingLayer`` holds what ``DynamicLayer`` holds after any sequence of updates, crops and an
    outside reassignment of its keys (BiTA's compaction), while appending into one buffer."""
    from transformers.cache_utils import DynamicLayer

    from explorer.engine.cache import GrowingLayer

    torch.manual_seed(0)
    grow, plain = GrowingLayer(), DynamicLayer()
    steps = [("add", 5), ("add", 1), ("add", 3), ("crop", 2), ("add", 1), ("squeeze", None), ("add", 70), ("add", 2)]
    for op, n in steps:
        if op == "add":
            k, v = torch.randn(1, 2, n, 4), torch.randn(1, 2, n, 4)
            gk, gv = grow.update(k, v)
            pk, pv = plain.update(k, v)
            assert torch.equal(gk, pk) and torch.equal(gv, pv)
        elif op == "crop":
            grow.crop(-n), plain.crop(-n)
        else:  # keep positions 0, 2, 4 only, as BiTA's compaction assigns a shorter view
            for layer in (grow, plain):
                layer.keys, layer.values = layer.keys[:, :, [0, 2, 4]], layer.values[:, :, [0, 2, 4]]
        assert torch.equal(grow.keys, plain.keys) and grow.get_seq_length() == plain.get_seq_length()
    buffer = grow._key_buffer
    grow.update(torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4))
    assert grow._key_buffer is buffer  # room left: appended in place, no new buffer
