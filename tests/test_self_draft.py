"""Shared computation between an early-exit draft and its target (EESD 3.1): verification over the
draft's cache gives the target's own logits (fp32, tolerance 1e-4 on logits of scale ~10), greedy
output equals ``ar``, and no layer runs twice on a position."""

import contextlib

import pytest
import torch
from helpers import PREFIX, chi_square_pvalue, exact_two_token_distribution

from explorer import api
from explorer.engine.forward import causal_mask, fast_decoder
from explorer.methods.eesd.self_draft import SelfSpeculation
from explorer.methods.eesd.exits import new_exit, untrained_exit

TOL = 1e-4
RUNS = 800  # sampled runs for the chi-square check


def _full_logits(model, ids):
    with torch.inference_mode():
        return model(torch.tensor([ids])).logits[0]


def test_causal_mask_sees_the_past_and_earlier_new_tokens():
    m = causal_mask(3, 2, torch.float32, torch.device("cpu"))[0, 0]
    assert m.shape == (2, 5)
    assert (m[0, :4] == 0).all() and m[0, 4] < -1e30
    assert (m[1] == 0).all()
    assert causal_mask(5, 1, torch.float32, torch.device("cpu")) is None


@pytest.mark.parametrize("trained_shape", [False, True])
def test_shared_verification_equals_a_full_forward(default_model, trained_shape):
    model = default_model.model
    ids = default_model.encode("Write a haiku about rain, then explain it.") + list(range(300, 330))
    full = _full_logits(model, ids)
    head = new_exit(model, 4) if trained_shape else untrained_exit(model, 4)
    shared = SelfSpeculation(model, head, default_model.device)
    n0 = len(ids) - 20
    assert (shared.verify_logits(ids[:n0], 3) - full[n0 - 3:n0]).abs().max() < TOL
    for k in range(1, 5):  # draft steps run the first layers ahead of the target's upper layers
        shared.draft_logits(ids[: n0 + k])
    assert (shared.verify_logits(ids[: n0 + 8], 8) - full[n0:n0 + 8]).abs().max() < TOL
    shared.cut(n0 + 3)  # a rejection: every layer and the exit drop what follows
    lengths = [layer.get_seq_length() for layer in shared.cache.layers]
    assert lengths == [n0 + 3] * len(lengths) and shared.exit_len <= n0 + 3
    assert (shared.verify_logits(ids, 10) - full[-10:]).abs().max() < TOL


def test_draft_logits_after_rollback_equal_a_fresh_draft(default_model):
    model = default_model.model
    ids = default_model.encode("Count to ten.") + [400, 401, 402, 403, 404]
    head = new_exit(model, 6)
    kept = SelfSpeculation(model, head, default_model.device)
    for k in range(len(ids) - 5, len(ids) + 1):
        kept.draft_logits(ids[:k])
    kept.cut(len(ids) - 3)
    fresh = SelfSpeculation(model, head, default_model.device)
    a, b = kept.draft_logits(ids[:-2]), fresh.draft_logits(ids[:-2])
    assert (a - b).abs().max() < TOL


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_greedy_equals_ar_and_no_layer_runs_twice_on_a_position(default_model, monkeypatch, mode):
    """Rows counted where each layer runs: the eager layers' forward (a hook), or the compiled step of each
    layer's KV cache (``fused_layer._run_step``, one call per layer and forward)."""
    from explorer.engine import compiled, fused_layer

    prompt = "List three uses of copper."
    ar = api.decode(default_model, prompt, max_new_tokens=24)
    layers = fast_decoder(default_model.model).layers  # the layers decoding runs (the model's fast view)
    rows: dict[int, int] = {}
    if mode == "compiled":
        if not layers[0].compiled_buckets[0]:
            pytest.skip(f"no compiled layer on this machine: {compiled.status()}")
        real = fused_layer._run_step

        def counted(step, layer, kv_like, hidden, *args):
            rows[id(layer)] = rows.get(id(layer), 0) + hidden.shape[1]
            return real(step, layer, kv_like, hidden, *args)
        monkeypatch.setattr(fused_layer, "_run_step", counted)
        context = contextlib.nullcontext()
    else:
        hooks = [layer.register_forward_hook(lambda m, a, out, i=i: rows.__setitem__(i, rows.get(i, 0) + out.shape[1]))
                 for i, layer in enumerate(layers)]
        context = compiled.eager()  # the fast path's public switch: every layer runs its eager forward
    try:
        with context:
            run = api.decode(default_model, prompt, draft="early-exit:4:untrained", gamma=3, max_new_tokens=24)
    finally:
        if mode == "eager":
            for h in hooks:
                h.remove()
    assert run.output_ids == ar.output_ids
    assert sum(len(r.drafted) for r in run.rounds) > 0
    # each round runs the pending token and its drafts once: the prompt, every draft, and one target
    # token per round after the first — in every layer, the draft's side (the first N) and the target's alike
    once = len(run.prompt_ids) + run.summary.drafted + run.summary.rounds - 1
    assert sorted(rows.values()) == [once] * len(layers), rows


def test_untrained_variant_and_bad_specs(default_model):
    run = api.decode(default_model, "Hi", draft="early-exit:2:untrained", max_new_tokens=4)
    assert "untrained" in run.draft_about
    for bad in ("early-exit:2:fast", "early-exit:0", "early-exit:30"):
        with pytest.raises(api.ExplorerError):
            api.decode(default_model, "Hi", draft=bad, max_new_tokens=4)


def test_sampling_with_a_restricted_vocabulary_exit_is_distributed_as_the_target(tiny_target):
    """A draft scoring only half the vocabulary (q = 0 elsewhere) over the shared cache: the emitted
    tokens still follow the target's distribution (chi-square, as in test_lossless)."""
    import numpy as np

    from explorer.engine.drafters import ForwardDrafter
    from explorer.engine.controllers import Fixed
    from explorer.engine.sampling import Rng, SamplingConfig
    from explorer.methods.eesd.self_draft import DraftRunner, SharedVerifier
    from explorer.engine.speculative import decode_rounds

    cfg = SamplingConfig(1.0)
    p0, p1 = exact_two_token_distribution(tiny_target, cfg)
    head = new_exit(tiny_target.model, 1, vocab=torch.arange(0, 32, 2))
    counts, accepted = np.zeros((2, p0.shape[0])), 0
    for seed in range(RUNS):
        shared = SelfSpeculation(tiny_target.model, head, tiny_target.device)
        drafter = ForwardDrafter("early-exit:1", runner=DraftRunner(shared), verifier=SharedVerifier(shared))
        rounds = [r for r, _ in decode_rounds(tiny_target, drafter, Fixed(2), cfg, PREFIX, 2, Rng(seed))]
        out = [t for r in rounds for t in r.emitted]
        assert all(t % 2 == 0 for r in rounds for t in r.drafted)  # drafts only from the scored rows
        counts[0, out[0]] += 1
        counts[1, out[1]] += 1
        accepted += sum(r.n_accepted for r in rounds)
    assert 0.05 < accepted / RUNS < 0.9
    assert chi_square_pvalue(counts[0], p0) > 1e-3 and chi_square_pvalue(counts[1], p1) > 1e-3
