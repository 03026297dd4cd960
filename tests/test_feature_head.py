"""The feature-head draft (EAGLE): the drafter's computation, its losslessness, the trainer's chain mask
against decoding, the trainer's mechanics, and the shipped head on the default model."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import PREFIX, chi_square_pvalue, exact_two_token_distribution

import explorer
from explorer.engine.controllers import Fixed
from explorer.engine.forward import decoder_parts
from explorer.engine.sampling import Rng, SamplingConfig
from explorer.engine.speculative import decode_rounds
from explorer.errors import ExplorerError
from explorer.methods.eagle import head as heads
from explorer.methods.eagle.drafter import FeatureHeadDrafter, FeatureVerifier
from explorer.methods.eagle.train import (HeadTrainConfig, heldout_acceptance, train_feature_head, unrolled,
                                          write_artifact)
from explorer.train import features, loop
from explorer.train.data import Sample

WORDS = "the cat sat on a mat and then ran to the big red barn where a dog slept all day long".split()
TINY_BANK = [{"id": f"p{i:02d}", "category": "tiny", "prompt": " ".join(WORDS[i % 9: i % 9 + 3 + i % 4]),
              "split": "heldout" if i % 6 == 0 else "train"} for i in range(24)]
TINY = HeadTrainConfig(tokens=600, steps=30, vocab=20, window=48, batch=4, top_k=8, max_new_tokens=24,
                       gen_batch_size=8, unroll=3, eval_steps=4)


def _quiet(*_):
    pass


class Always:
    def keep_drafting(self, step, q_row):
        return True


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def tiny():
    return explorer.load("tiny-random:0:4")


@pytest.mark.parametrize("layers", [1, 2])
def test_the_trainers_chain_is_what_decoding_computes(tiny, layers):
    """Step s of the unrolled trainer at the round's positions equals the drafter's s-th predicted feature
    (the chain mask gives each step exactly the cache decoding has), for every step of a 4-token draft."""
    head = heads.new_head(tiny.model, layers, seed=3)
    context = tiny.encode("the cat sat on a mat and then")
    drafter = FeatureHeadDrafter("feature-head:test", head, tiny)
    drafter.verifier.logits(context[:-1], 1)  # the target holds the context but its pending token
    proposal = drafter.propose(context, 4, SamplingConfig(0.0), Rng(0), Always())
    assert len(proposal.tokens) == 4 and len(drafter.predicted) == 4
    sequence = context + proposal.tokens
    windows = features.pack([Sample(tuple(context), tuple(proposal.tokens), "x", "train", "greedy")], len(sequence))
    truth = FeatureVerifier(tiny.model, tiny.device)
    truth.logits(sequence, 1)  # the target's features in fp32 (the trainer's cache holds them in fp16)
    with torch.no_grad():
        outs = unrolled(head, decoder_parts(tiny.model), truth.features, windows, slice(0, 1), 4)
    n = len(context) - 1
    for s, predicted in enumerate(drafter.predicted, start=1):
        assert torch.allclose(outs[s - 1][0, n + s - 2], predicted, atol=1e-4), s


def test_first_round_drafts_nothing_then_the_head_drafts_and_records_feature_agreement(tiny):
    run = explorer.decode(tiny, "the cat sat on", draft="feature-head:untrained", gamma=3, max_new_tokens=12)
    ar = explorer.decode(tiny, "the cat sat on", method="ar", max_new_tokens=12)
    assert run.output_ids == ar.output_ids
    assert run.rounds[0].drafted == () and run.rounds[0].event == "no-draft"
    drafting = [r for r in run.rounds if r.drafted]
    assert drafting and all(len(r.detail["feature_cos"]) == len(r.drafted) for r in drafting)
    assert all(-1 <= c <= 1 for r in drafting for c in r.detail["feature_cos"])
    assert "untrained feature head" in run.draft_about


def test_the_verifier_keeps_the_targets_features_through_rollbacks(tiny):
    ids = tiny.encode("the big red barn where a dog slept")
    verifier = FeatureVerifier(tiny.model, tiny.device)
    verifier.logits(ids, 3)
    verifier.truncate(5)
    verifier.logits(ids[:5] + [3, 4, 5], 2)
    fresh = FeatureVerifier(tiny.model, tiny.device)
    fresh.logits(ids[:5] + [3, 4, 5], 1)
    assert verifier.features.shape == (1, 8, tiny.model.config.hidden_size)
    assert torch.allclose(verifier.features, fresh.features, atol=1e-5)


def test_sampling_with_a_restricted_vocabulary_head_is_distributed_as_the_target(tiny_target):
    """A random head scoring half the vocabulary (q = 0 elsewhere): the second token, which goes through
    the draft's accept-or-resample (the first round drafts nothing), follows the target (chi-square)."""
    cfg = SamplingConfig(1.0)
    _, p1 = exact_two_token_distribution(tiny_target, cfg)
    head = heads.new_head(tiny_target.model, 1, vocab=torch.arange(0, 32, 2), seed=1)
    counts, accepted, runs = np.zeros(p1.shape[0]), 0, 800
    for seed in range(runs):
        drafter = FeatureHeadDrafter("feature-head:test", head, tiny_target)
        rounds = [r for r, _ in decode_rounds(tiny_target, drafter, Fixed(2), cfg, PREFIX, 3, Rng(seed))]
        out = [t for r in rounds for t in r.emitted]
        assert all(t % 2 == 0 for r in rounds for t in r.drafted)
        counts[out[1]] += 1
        accepted += sum(r.n_accepted for r in rounds)
    assert 0.05 < accepted / runs < 0.9
    assert chi_square_pvalue(counts, p1) > 1e-3


def test_methods_that_verify_elsewhere_refuse_the_feature_head(tiny):
    for kwargs in (dict(method="bild"), dict(method="hierarchical", draft="feature-head:untrained>early-exit:2"),
                   dict(method="beam", beam_rule="004")):
        kwargs.setdefault("draft", "feature-head:untrained")
        with pytest.raises(ExplorerError, match="feature-head"):
            explorer.decode(tiny, "the cat", max_new_tokens=4, **kwargs)
    with pytest.raises(ExplorerError, match="feature-head or feature-head:untrained"):
        explorer.decode(tiny, "the cat", draft="feature-head:fast", max_new_tokens=4)


# -- the trainer ----------------------------------------------------------------------------------------


def test_training_lowers_the_loss_is_seeded_resumes_and_writes_an_artifact(tiny, cache, tmp_path, monkeypatch):
    first = train_feature_head(tiny, TINY, TINY_BANK, progress=_quiet)
    assert np.mean(first.losses[-5:]) < np.mean(first.losses[:5])
    assert len(first.heldout_acceptance) == TINY.eval_steps and 0 < first.vocab_coverage <= 1
    path = write_artifact(tiny, TINY, first, tmp_path / "out", "python -m explorer train feature-head")
    loaded = heads.load_head(tiny.model, path)
    assert loaded.manifest["heldout_acceptance"] == [round(a, 4) for a in first.heldout_acceptance]
    assert torch.equal(loaded.vocab, first.head.vocab) and len(loaded.layers) == 1
    # an interrupted run resumes from its checkpoint to the same weights as an uninterrupted one
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "other"))
    from explorer.methods.eagle import train as trainer

    real_save, calls = trainer.checkpoint.save, []

    def save_then_stop(*args, **kwargs):
        real_save(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(loop, "CHECKPOINT_EVERY", 10)
    monkeypatch.setattr(trainer.checkpoint, "save", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        train_feature_head(tiny, TINY, TINY_BANK, progress=_quiet)
    resumed = train_feature_head(tiny, TINY, TINY_BANK, progress=_quiet)
    for (name, a), (_, b) in zip(first.head.state_dict().items(), resumed.head.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-6), name


def test_training_goes_on_from_a_trained_head_and_keeps_what_each_run_bought(tiny, cache, tmp_path):
    import dataclasses

    from explorer.methods.eagle.train import head_digest

    first = train_feature_head(tiny, TINY, TINY_BANK, progress=_quiet)
    path = write_artifact(tiny, TINY, first, tmp_path / "out", "python -m explorer train feature-head")
    init = heads.load_head(tiny.model, path)
    kept = {k: v.clone() for k, v in init.state_dict().items()}
    more = dataclasses.replace(TINY, steps=20, init=head_digest(path))
    second = train_feature_head(tiny, more, TINY_BANK, progress=_quiet, init=init)
    # it starts where the first run ended (its weights in float16), not from a fresh head
    assert second.untrained_acceptance == pytest.approx(first.heldout_acceptance, abs=0.05)
    assert np.mean(second.losses[:5]) < np.mean(first.losses[:5])
    assert all(torch.equal(v, init.state_dict()[k]) for k, v in kept.items())  # the head it read is untouched
    manifest = heads.load_head(tiny.model, write_artifact(tiny, more, second, tmp_path / "out2", "…", init)).manifest
    assert manifest["steps"] == TINY.steps + 20 and [run["steps"] for run in manifest["history"]] == [TINY.steps, 20]
    assert manifest["untrained_acceptance"] == [round(a, 4) for a in first.untrained_acceptance]
    assert manifest["config"]["init"] == head_digest(path)
    with pytest.raises(ExplorerError, match="--init: that head has 1 layer"):
        train_feature_head(tiny, dataclasses.replace(more, vocab=12), TINY_BANK, progress=_quiet, init=init)


def test_an_interrupted_frozen_pass_resumes_from_the_pieces_it_saved(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(features, "PIECE_WINDOWS", 2)
    rng = np.random.default_rng(0)
    samples = [Sample(tuple(rng.integers(1, 30, 5).tolist()), tuple(rng.integers(1, 30, 7).tolist()), f"p{i}",
                      "train", "greedy") for i in range(7)]
    windows = features.pack(samples, 16, 0)  # 7 windows: pieces of 2, 2, 2 and 1
    whole = features.frozen_pass(tiny, windows, (2, 4), 5)
    pieces, seen = tmp_path / "pieces", []

    def stop_in_the_third_piece(done, total, line):
        seen.append(done)
        if done == 5:
            raise KeyboardInterrupt

    monkeypatch.setattr(features, "FORWARD_BATCH", 1)
    with pytest.raises(KeyboardInterrupt):
        features.frozen_pass(tiny, windows, (2, 4), 5, stop_in_the_third_piece, pieces)
    assert sorted(p.name for p in pieces.iterdir()) == ["000000-000002.safetensors", "000002-000004.safetensors"]
    seen.clear()
    resumed = features.frozen_pass(tiny, windows, (2, 4), 5, lambda done, total, line: seen.append(done), pieces)
    assert seen == [5, 6, 7]  # only the windows not saved were run again
    for a, b in zip((whole[0][2], whole[0][4], whole[1], whole[2]), (resumed[0][2], resumed[0][4], resumed[1], resumed[2])):
        assert torch.equal(a, b)


def test_bad_configs_are_refused_with_the_flag_named():
    for bad, words in ((dict(layers=9), "--layers"), (dict(unroll=0), "--unroll"), (dict(vocab=1), "--vocab"),
                       (dict(w_feature=0, w_token=0), "weights"), (dict(mode="beam"), "unknown mode")):
        with pytest.raises(ExplorerError, match=words):
            HeadTrainConfig(**bad)


def test_a_head_for_another_model_is_refused(tiny, tmp_path):
    other = explorer.load("tiny-random:5:4")
    path = heads.save_head(heads.new_head(other.model), other.model, tmp_path, {})
    with pytest.raises(ExplorerError, match="another model"):
        heads.load_head(tiny.model, path)


# -- the shipped head on the default model ------------------------------------------------------------

HELDOUT_FILE = Path(__file__).parent / "data" / "heldout_answers.json"


def test_the_shipped_head_drafts_better_than_an_untrained_one(default_model):
    path = heads.find_head(default_model.model)
    assert path is not None, "no feature head ships for the default model in assets/feature-head/"
    head = heads.load_head(default_model.model, path)
    rows = json.loads(HELDOUT_FILE.read_text())["samples"]
    samples = [Sample(tuple(r["prompt_ids"]), tuple(r["answer_ids"]), r["prompt_id"], "heldout", "greedy")
               for r in rows]
    windows = features.pack(samples, 512, min(default_model.eos_token_ids))
    last = len(decoder_parts(default_model.model).layers)
    hidden, top_ids, top_logp = features.frozen_pass(default_model, windows, (last,), 1)
    feats = features.Features(hidden, top_ids, top_logp)
    trained = heldout_acceptance(default_model, head, windows, feats, 3)
    untrained = heldout_acceptance(default_model, heads.new_head(default_model.model), windows, feats, 3)
    assert trained[0] >= untrained[0] + 0.15, (trained, untrained)  # as the exits' test: 24.5 % against 0 % here
    assert abs(trained[0] - head.manifest["heldout_acceptance"][0]) < 0.15, trained


def test_greedy_with_the_shipped_head_equals_ar(default_model):
    prompt = "Give me three tips for keeping a small vegetable garden."
    ar = explorer.decode(default_model, prompt, method="ar", max_new_tokens=40)
    run = explorer.decode(default_model, prompt, draft="feature-head", gamma=4, max_new_tokens=40)
    assert run.output_ids == ar.output_ids
    assert run.summary.accepted > 0 and "trained feature head" in run.draft_about


def test_the_eagle_preset_names_the_shipped_head_and_runs_losslessly(default_model):
    preset = explorer.method_preset("eagle", default_model.model)
    assert preset["draft"] == "feature-head" and 1 <= preset["gamma"] <= 16 and preset["why"]
    prompt = "Explain what a prime number is in two sentences."
    eagle = explorer.decode(default_model, prompt, method="eagle", max_new_tokens=32)
    ar = explorer.decode(default_model, prompt, method="ar", max_new_tokens=32)
    assert eagle.output_ids == ar.output_ids
    assert eagle.method == "eagle" and eagle.draft == "feature-head"
    assert eagle.settings.controller == preset["controller"] and eagle.summary.accepted > 0


def test_eagle_without_a_shipped_head_says_how_to_get_one(tiny_target):
    with pytest.raises(ExplorerError, match="train feature-head"):
        explorer.decode(tiny_target, "the cat sat", method="eagle", chat=False, max_new_tokens=4)
    with pytest.raises(ExplorerError, match="has no preset"):
        explorer.method_preset("bild", tiny_target)


def test_the_views_round_title_names_each_drafts_fate_in_runs():
    from explorer.viz.views.feature_head import _fate_runs

    assert _fate_runs(["accepted", "accepted", "rejected", "discarded", "discarded"]) == \
        "#1–2 accepted, #3 rejected, #4–5 discarded"
    assert _fate_runs(["rejected"]) == "#1 rejected"


def test_the_view_says_whether_drift_or_confidence_separates_accepted_from_refused_drafts(tiny_target):
    """#29 item 5: accepted and refused drafts had the same cosine (≈ 0.68), so "drafts fail where features
    drift" was not what the panel showed; it now says what does, from the run's own numbers."""
    import dataclasses

    from explorer.viz.views.feature_head import feature_head_figure, what_separates

    trace = explorer.decode(tiny_target, prompt_ids=[3, 4, 5], draft="feature-head:untrained", max_new_tokens=24)

    def rigged(cos_kept, q_kept, cos_refused, q_refused):  # first draft accepted, second refused, each round
        return [dataclasses.replace(r, drafted=(1, 2), n_accepted=1, rejected_at=1, q_drafted=(q_kept, q_refused),
                                    detail={**r.detail, "feature_cos": [cos_kept, cos_refused]})
                for r in trace.rounds if r.drafted]

    assert what_separates(rigged(0.9, 0.5, 0.6, 0.5)).endswith("feature drift tells them apart")
    assert what_separates(rigged(0.68, 0.8, 0.67, 0.3)).endswith("confidence tells them apart, not drift")
    words = what_separates(rigged(0.68, 0.5, 0.67, 0.48))
    assert words == "accepted: cosine 0.68, q 0.50 · refused: cosine 0.67, q 0.48 — neither tells them apart"
    shown = dataclasses.replace(trace, rounds=tuple(rigged(0.68, 0.5, 0.67, 0.48)))
    figure = feature_head_figure(shown, 0)
    assert figure.layout.annotations[0].text == "Over the run: neither tells them apart"  # the panel's title
    assert "(run: 0.68; the head's confidence q 0.50)" in figure.data[1].name  # the run's means, in the legend
    assert what_separates([r for r in trace.rounds if not r.drafted]) == ""  # nothing to tell apart yet
