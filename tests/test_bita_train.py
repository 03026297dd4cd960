"""BiTA's tuning (section 3.1) on a tiny random model: the training forward is the decoding forward, the
SAR loss falls, a run is seeded and resumes from its checkpoint to the same result, and the artifact
round-trips with a manifest."""

import json

import pytest
import torch

import explorer
from explorer.methods.bita.tokens import BitaTokens, find_tokens, init_tokens, load_tokens, tokens_for
from explorer.methods.bita.tree import BitaConfig, build_tree, tree_forward
from explorer.errors import ExplorerError
from explorer.methods.bita import train as trainer
from explorer.methods.bita.train import (BitaTrainConfig, _tree_accepted, context_kv, labels_for, sar_logits, split_points,
                                 train_bita, write_artifact)
from explorer.train.data import Sample

PROMPTS = [{"id": f"t{i}", "prompt": text, "split": "train"} for i, text in enumerate(
    ["the cat sat on the mat", "a dog ran far away", "we like to sing songs", "how are you today?",
     "tell me a story", "one two three four"])] + [
    {"id": "h0", "prompt": "where is the sun?", "split": "heldout"}, {"id": "h1", "prompt": "say hello", "split": "heldout"}]


@pytest.fixture()
def tiny(monkeypatch, tmp_path):
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache"))
    return explorer.load("tiny-random:1")


def test_training_forward_is_the_decoding_forward(tiny_target):
    """The masks' logits the trainer optimises are the ones decoding will read: the same context, prompt
    tokens and mask embeddings through ``sar_logits`` and through the engine's ``tree_forward``."""
    model = tiny_target.model
    tokens = init_tokens(model, 4, 3, seed=3)
    ids = tiny_target.encode("the cat sat on the mat and")
    ctx = context_kv(model, ids)
    with torch.no_grad():
        train_logits = sar_logits(model, tokens.prompt_keys, tokens.prompt_values, tokens.masks, ctx, [len(ids) - 1])
    cache = tokens.prompt_cache()
    layout = build_tree(BitaConfig("efficient", 3, 2), [], max_depth=5)  # no nodes: the context's group only
    with torch.inference_mode():
        hidden = tree_forward(model, tokens.masks, cache, ids, layout, tokens.n_prompt, 0)
        decode_logits = model.get_output_embeddings()(hidden[len(ids):])
    assert torch.allclose(train_logits, decode_logits, atol=1e-4)


def test_split_points_leave_room_for_the_target_token_and_the_labels():
    sample = Sample(tuple(range(5)), tuple(range(100, 110)), "x", "train", "greedy")
    for lasts in (split_points(sample, 3, 50, torch.Generator().manual_seed(0)), split_points(sample, 3, 4, None)):
        assert lasts and min(lasts) >= 4 and max(lasts) <= 5 + 10 - 3 - 2
        assert labels_for(sample, lasts, 3).tolist()[:3] == [100 + (lasts[0] - 4) + j for j in range(1, 4)]  # mask j: the token j after the next
    assert split_points(Sample((1,), (2, 3), "y", "train", "greedy"), 3, 4, None) == []


@pytest.mark.parametrize("hits,efficient,full", [
    ([[1, 0], [1, 0], [0, 0]], 2, 2),   # two top-1 matches, then a miss
    ([[0, 1], [1, 0], [1, 0]], 1, 3),   # a rank-2 match is a leaf of the efficient tree
    ([[0, 0], [1, 0], [1, 0]], 0, 0),
])
def test_teacher_forced_acceptance_follows_each_trees_rule(hits, efficient, full):
    hit = torch.tensor(hits, dtype=torch.bool)
    assert _tree_accepted(hit, expand_all=False) == efficient
    assert _tree_accepted(hit, expand_all=True) == full


def test_training_lowers_the_loss_is_seeded_and_resumes(tiny, monkeypatch, tmp_path):
    config = BitaTrainConfig(prompt_tokens=2, mask_tokens=2, steps=8, batch=2, groups=4, lr=5e-2,
                             max_new_tokens=24, gen_batch_size=4)
    quiet = lambda *a: None  # noqa: E731
    whole = train_bita(tiny, config, PROMPTS, progress=quiet)
    assert len(whole.losses) == 8 and sum(whole.losses[-3:]) < sum(whole.losses[:3])
    assert whole.heldout["trained"]["splits"] > 0
    for run in (tmp_path / "cache" / "bita-runs").glob("*.pt"):
        run.unlink()

    monkeypatch.setattr(trainer, "CHECKPOINT_EVERY", 3)

    def interrupt(done, total, line):
        if "step 5/" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_bita(tiny, config, PROMPTS, progress=interrupt)
    resumed = train_bita(tiny, config, PROMPTS, progress=quiet)  # from the step-3 checkpoint
    assert resumed.losses == pytest.approx(whole.losses, rel=1e-4)
    assert torch.allclose(resumed.tokens.masks, whole.tokens.masks, atol=1e-5)

    path = write_artifact(tiny, config, resumed, tmp_path / "out" / "tokens.safetensors", "test")
    manifest = json.loads(path.with_suffix(".json").read_text())
    assert manifest["prompt_tokens"] == 2 and manifest["mask_tokens"] == 2 and manifest["steps"] == 8
    assert {"trained", "untrained"} <= manifest["heldout"].keys() and "final_loss" in manifest
    loaded = load_tokens(tiny.model, path)
    assert torch.allclose(loaded.masks, resumed.tokens.masks, atol=1e-2)  # stored in float16
    assert tokens_for(tiny.model, str(path), 1).n_masks == 1
    with pytest.raises(ExplorerError, match="at most"):
        tokens_for(tiny.model, str(path), 3)


def test_a_capped_context_cache_recomputes_what_it_dropped_and_trains_the_same(tiny, monkeypatch, tmp_path):
    """The run keeps at most ``MAX_CONTEXTS`` answers' frozen keys and values (3 000 answers' would not fit in
    memory); a dropped one is recomputed when its answer comes round again, so training is unchanged."""
    config = BitaTrainConfig(prompt_tokens=2, mask_tokens=2, steps=6, batch=2, groups=4, lr=5e-2,
                             max_new_tokens=24, gen_batch_size=4)
    quiet = lambda *a: None  # noqa: E731
    computed = []
    real_kv = trainer.sample_kv
    monkeypatch.setattr(trainer, "sample_kv", lambda *a: computed.append(a[1]) or real_kv(*a))
    whole = train_bita(tiny, config, PROMPTS, progress=quiet)
    uncapped = len(computed)
    for run in (tmp_path / "cache" / "bita-runs").glob("*.pt"):
        run.unlink()
    computed.clear()
    monkeypatch.setattr(trainer, "MAX_CONTEXTS", 1)
    capped = train_bita(tiny, config, PROMPTS, progress=quiet)
    assert len(computed) > uncapped  # answers seen again were recomputed, not kept
    assert capped.losses == pytest.approx(whole.losses, rel=1e-5)
    assert torch.allclose(capped.tokens.masks, whole.tokens.masks, atol=1e-6)


def test_artifacts_refuse_another_model(tiny, tiny_draft, tmp_path):
    tokens = init_tokens(tiny.model, 1, 2)
    from explorer.methods.bita.tokens import save_tokens

    path = save_tokens(tokens, tiny.model, tmp_path / "t.safetensors", {"model": "tiny"})
    with pytest.raises(ExplorerError, match="another model"):
        load_tokens(tiny_draft.model, path)
    with pytest.raises(ExplorerError, match="no BiTA tokens"):
        tokens_for(tiny.model, str(tmp_path / "missing.safetensors"))
    assert find_tokens(tiny.model, tmp_path) is None
    assert isinstance(tokens_for(tiny.model, "untrained", 2), BitaTokens)


def test_bad_training_settings_are_refused():
    for bad in (dict(mask_tokens=0), dict(prompt_tokens=-1), dict(steps=0), dict(lr=0)):
        with pytest.raises(ExplorerError):
            BitaTrainConfig(**bad)


def test_a_step_whose_loss_comes_in_pieces_trains_as_one_loss(tmp_path):
    """The trainers' shared loop (``train.loop.fit``, which BiTA runs) back-propagates a step's loss piece by piece
    (BiTA: one sample at a time through the frozen target) to the same parameters and losses as the summed loss."""
    from explorer.train.loop import fit

    targets = torch.linspace(-1, 1, 6).view(3, 2)

    def run(pieces: bool, name: str):
        w = torch.nn.Parameter(torch.zeros(2))

        def loss_at(step):
            parts = (((w - t) ** 2).sum() * (step + 1) / 3 for t in targets)
            return parts if pieces else sum(parts)

        losses, _ = fit([w], loss_at, steps=5, lr=0.1, warmup=0.2, checkpoint_file=tmp_path / f"{name}.pt",
                        tensors=lambda: {"w": w.detach()}, restore=lambda state: w.data.copy_(state["w"]),
                        progress=lambda *a: None, label=name, lr_floor=0.05, report_every=5)
        return losses, w.detach()

    whole, pieces = run(False, "whole"), run(True, "pieces")
    assert pieces[0] == pytest.approx(whole[0], rel=1e-6) and torch.allclose(pieces[1], whole[1], atol=1e-7)
    assert whole[1].abs().sum() > 0  # it trained


def test_bita_runs_the_trainers_shared_loop():
    """One training loop (``train.loop``): BiTA's tuning builds no optimiser and steps none of its own."""
    import ast
    from pathlib import Path

    source = Path(trainer.__file__).read_text(encoding="utf-8")
    names = {node.attr for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Attribute)}
    assert not names & {"AdamW", "LambdaLR", "clip_grad_norm_", "backward", "zero_grad"}, names & {
        "AdamW", "LambdaLR", "clip_grad_norm_", "backward", "zero_grad"}
    assert "fit" in {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}
