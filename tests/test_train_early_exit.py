"""The EESD exit-layer trainer (explorer.train): tiny models for the mechanics, the default model for the
shipped artifacts."""

import json
from pathlib import Path

import pytest
import torch

import explorer
from explorer.bench import PROMPTS_FILE
from explorer.cli import main
from explorer.errors import ExplorerError
from explorer.methods.eesd import exits
from explorer.methods.eesd import train_exit as early_exit
from explorer.methods.eesd.train_exit import TrainConfig, agreement, train_early_exit, write_artifact
from explorer.train import data, features, loop
from explorer.train.data import Sample, load_prompt_bank, self_generated
from explorer.train.generate import generate_batch

WORDS = "the cat sat on a mat and then ran to the big red barn where a dog slept all day long".split()
# 24 letters-only prompts (the tiny models' tokenizer knows 32 characters), 4 of them held out
TINY_BANK = [{"id": f"p{i:02d}", "category": "tiny", "prompt": " ".join(WORDS[i % 9: i % 9 + 3 + i % 4]),
              "split": "heldout" if i % 6 == 0 else "train"} for i in range(24)]
TINY = TrainConfig(n_layers=2, tokens=600, steps=30, vocab=20, window=48, batch=4, top_k=8, max_new_tokens=24,
                   gen_batch_size=8)


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def tiny():
    return explorer.load("tiny-random:0:4")


def _quiet(*_):
    pass


def test_prompt_bank_is_disjoint_from_the_benchmark_and_holds_out_every_category():
    bank = load_prompt_bank()
    bench = json.loads(PROMPTS_FILE.read_text())["prompts"]
    assert len(bank) >= 200 and len({p["id"] for p in bank}) == len(bank)
    assert not {p["prompt"] for p in bank} & {p["text"] for p in bench}
    heldout = load_prompt_bank("heldout")
    assert 0.05 <= len(heldout) / len(bank) <= 0.15
    assert {p["category"] for p in heldout} == {p["category"] for p in bank}


def test_self_generated_is_cached_per_settings_and_deterministic(tiny, cache, monkeypatch):
    prompts = TINY_BANK[:6]
    first = self_generated(tiny, prompts, "hybrid", max_new_tokens=12, batch_size=4, progress=_quiet)
    assert {s.mode for s in first} == {"greedy", "sample"}  # hybrid mixes both
    assert [s.prompt_id for s in first] == [p["id"] for p in prompts]
    assert all(len(s.answer_ids) == 12 and s.prompt_ids == tuple(tiny.encode(p["prompt"]))
               for s, p in zip(first, prompts))
    monkeypatch.setattr(data, "_generate", lambda *a, **k: pytest.fail("generated again instead of reading the cache"))
    assert self_generated(tiny, prompts, "hybrid", max_new_tokens=12, batch_size=4, progress=_quiet) == first
    monkeypatch.undo()
    monkeypatch.setenv("EXPLORER_CACHE", str(cache.parent / "other"))
    again = self_generated(tiny, prompts, "hybrid", max_new_tokens=12, batch_size=4, progress=_quiet)
    assert again == first  # same seed, fresh cache: same answers
    other_seed = self_generated(tiny, prompts, "sample", max_new_tokens=12, batch_size=4, seed=1, progress=_quiet)
    assert [s.answer_ids for s in other_seed] != [s.answer_ids for s in first]


def test_exported_answers_are_read_back_on_a_machine_without_them(tiny, cache, tmp_path, monkeypatch):
    """``export_corpus`` writes the passes ``corpus`` reads; with a fresh cache the same corpus comes from the
    archives without generating a token, and an archive that does not hold together is ignored."""
    monkeypatch.setattr(data, "SHIPPED", tmp_path / "selfgen")
    written = data.export_corpus(tiny, TINY_BANK, 300, "greedy+sample", 12, batch_size=8, progress=_quiet,
                                 folder=tmp_path / "selfgen")
    assert len(written) >= 3 and all(p.suffix == ".npz" for p in written)  # greedy + sampled passes, held out
    train = [p for p in TINY_BANK if p["split"] == "train"]
    made = data.corpus(tiny, train, 300, "greedy+sample", 12, batch_size=8, progress=_quiet)
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "fresh"))
    monkeypatch.setattr(data, "_generate", lambda *a, **k: pytest.fail("generated instead of reading the archive"))
    again = data.corpus(tiny, train, 300, "greedy+sample", 12, batch_size=8, progress=_quiet)
    assert again == made and {s.mode for s in again} == {"greedy", "sample"}
    import numpy as np
    with np.load(written[0]) as archive:
        broken = dict(archive)
    broken["answer_length"] = broken["answer_length"] + 1  # lengths that do not add up
    np.savez(written[0], **broken)
    assert data._read_archive(written[0].stem, tiny.vocab_size) == {}


def test_batched_answers_are_each_prompts_own_and_stop_at_eos():
    """Left-padded rows decode as they would alone (greedy: the same tokens as ``ar``), a row ends at its
    first end-of-sequence token and leaves the batch, and the rest run on."""
    target = explorer.load("tiny-random:0:4")
    prompts = [tuple(target.encode(t)) for t in ("the cat", "a big red barn where", "dog")]
    alone = [list(explorer.decode(target, prompt_ids=list(p), method="ar", max_new_tokens=10).output_ids)
             for p in prompts]
    assert generate_batch(target, prompts, "greedy", 10, 0) == [tuple(a) for a in alone]
    eos = alone[1][3]  # make the second row's fourth token the end of the text
    target.model.generation_config.eos_token_id = eos
    cut = generate_batch(target, prompts, "greedy", 10, 0)
    for answer, full in zip(cut, alone):
        end = full.index(eos) + 1 if eos in full else len(full)
        assert list(answer) == full[:end]
    sampled = [generate_batch(target, prompts, "sample", 10, seed) for seed in (1, 1, 2)]
    assert sampled[0] == sampled[1] != sampled[2] and all(len(a) <= 10 for a in sampled[0])


def test_packing_keeps_samples_whole_and_apart():
    samples = [Sample((1, 2), (3, 4, 5), "a", "train", "greedy"), Sample((6,), (7, 8), "b", "train", "greedy"),
               Sample((9, 9), (1,), "c", "train", "greedy")]
    w = features.pack(samples, window=6)
    assert w.ids.shape == (2, 6) and w.answer_tokens == 3 + 2 + 1
    assert w.ids[0].tolist() == [1, 2, 3, 4, 5, 0] and w.segment[0].tolist() == [0, 0, 0, 0, 0, -1]
    mask = features.attention_mask(w.segment, torch.float32)[:, 0]  # (B, W, W)
    assert (mask[1][w.segment[1][:, None] != w.segment[1][None, :]] < 0).all()  # no attention across samples
    assert w.position[1].tolist() == [0, 1, 2, 0, 1, 2]  # positions restart at each sample
    assert w.loss[1].tolist() == [True, True, False, False, True, False]  # from the prompt's last token
    assert not torch.isinf(torch.softmax(mask, -1)).any() and not torch.isnan(torch.softmax(mask, -1)).any()


def test_trainer_lowers_the_loss_beats_untrained_and_writes_an_artifact(tiny, cache, tmp_path):
    result = train_early_exit(tiny, TINY, TINY_BANK, progress=_quiet)
    first, last = sum(result.losses[:5]) / 5, sum(result.losses[-5:]) / 5
    assert last < 0.9 * first
    assert result.heldout_agreement > result.untrained_agreement
    assert result.head.vocab.numel() == 20 and result.data_tokens >= 500

    path = write_artifact(tiny, TINY, result, tmp_path / "out", "python -m explorer train early-exit ...")
    assert exits.find_exit(tiny.model, 2, tmp_path / "out") == path
    loaded = exits.load_exit(tiny.model, path)
    manifest = loaded.manifest
    assert manifest["heldout_agreement"] == round(result.heldout_agreement, 4)
    assert manifest["vocab_size"] == 20 and manifest["steps"] == 30 and manifest["model"] == "tiny-random:0:4"
    assert torch.equal(loaded.vocab, result.head.vocab)
    for name, value in result.head.layers[0].state_dict().items():
        assert torch.allclose(loaded.layers[0].state_dict()[name], value.half().float(), atol=0, rtol=0)
    # the loaded (fp16-rounded) exit agrees as well as the trained one on the same features
    windows, feats = _heldout_features(tiny, TINY_BANK, TINY)
    assert abs(agreement(tiny, loaded, windows, feats) - result.heldout_agreement) <= 0.02

    with pytest.raises(ExplorerError, match="trained for another model"):
        exits.load_exit(explorer.load("tiny-random:1:4").model, path)


def test_training_is_deterministic_resumes_and_reuses_the_data_cache(tiny, cache, monkeypatch):
    whole = train_early_exit(tiny, TINY, TINY_BANK, progress=_quiet)

    def no_work(*_, **__):
        pytest.fail("recomputed cached data")

    monkeypatch.setattr(data, "_generate", no_work)
    monkeypatch.setattr(features, "frozen_pass", no_work)
    for run in (cache / "early-exit-runs").iterdir():
        run.unlink()
    monkeypatch.setattr(loop, "CHECKPOINT_EVERY", 10)

    def interrupt(done, total, line):
        if "step 20/" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_early_exit(tiny, TINY, TINY_BANK, progress=interrupt)
    resumed = train_early_exit(tiny, TINY, TINY_BANK, progress=_quiet)
    assert resumed.losses == whole.losses
    for name, value in whole.head.layers[0].state_dict().items():
        assert torch.equal(resumed.head.layers[0].state_dict()[name], value)


def test_another_seed_or_loss_trains_differently(tiny, cache):
    base = train_early_exit(tiny, TrainConfig(**{**TINY.__dict__, "steps": 10}), TINY_BANK, progress=_quiet)
    seeded = train_early_exit(tiny, TrainConfig(**{**TINY.__dict__, "steps": 10, "seed": 1}), TINY_BANK,
                              progress=_quiet)
    ce = train_early_exit(tiny, TrainConfig(**{**TINY.__dict__, "steps": 10, "loss": "ce", "vocab": None}),
                          TINY_BANK, progress=_quiet)
    assert seeded.losses != base.losses and ce.losses != base.losses and ce.head.vocab is None


@pytest.mark.parametrize("changes, message", [
    ({"loss": "mse"}, "unknown loss"), ({"vocab": 1}, "--vocab"), ({"steps": 0}, "at least 1"),
    ({"mode": "beam"}, "unknown mode"),
])
def test_bad_settings_are_refused(changes, message):
    with pytest.raises(ExplorerError, match=message):
        TrainConfig(**{**TINY.__dict__, **changes})


def test_cli_trains_and_reports(tiny, cache, tmp_path, capsys):
    bank = tmp_path / "bank.json"
    bank.write_text(json.dumps({"prompts": TINY_BANK}))
    out = tmp_path / "exits"
    argv = ["train", "early-exit", "--model", "tiny-random:0:4", "--layers", "1", "--layers", "2",
            "--tokens", "600", "--steps", "5", "--vocab", "20", "--window", "48", "--batch", "4",
            "--max-new-tokens", "24", "--prompts", str(bank), "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "N=1: held-out agreement" in printed and "N=2: held-out agreement" in printed
    manifest = json.loads(next(out.glob("*-n2.json")).read_text())
    assert manifest["command"].startswith("python -m explorer train early-exit --model tiny-random:0:4")
    assert main(argv[:4] + ["--layers", "9"]) == 2
    assert "1 <= N < 4" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["train", "early-exit", "--layers", "2", "--loss", "mse"])
    assert stop.value.code == 2


def _heldout_features(target, bank, config):
    heldout = [p for p in bank if p["split"] == "heldout"]
    samples = self_generated(target, heldout, "greedy", config.max_new_tokens, config.data_seed,
                             config.gen_batch_size, progress=_quiet)
    windows = features.pack(samples, config.window)
    hidden, top_ids, top_logp = features.frozen_pass(target, windows, (config.n_layers,), 1)
    return windows, features.Features(hidden, top_ids, top_logp)


# ---------------------------------------------------------------------------------------------------
# The shipped artifacts on the default model

HELDOUT_FILE = Path(__file__).parent / "data" / "heldout_answers.json"


def _shipped(model):
    found = [exits.find_exit(model, n) for n in range(1, 30)]
    return [p for p in found if p is not None]


def test_shipped_exits_beat_the_untrained_exit_on_heldout_answers(default_model):
    paths = _shipped(default_model.model)
    assert paths, "no trained early-exit artifact ships for the default model in assets/early-exit/"
    rows = json.loads(HELDOUT_FILE.read_text())["samples"]
    samples = [Sample(tuple(r["prompt_ids"]), tuple(r["answer_ids"]), r["prompt_id"], "heldout", "greedy")
               for r in rows]
    assert {r["prompt_id"] for r in rows} <= {p["id"] for p in load_prompt_bank("heldout")}
    heads = [exits.load_exit(default_model.model, p) for p in paths]
    windows = features.pack(samples, 512, min(default_model.eos_token_ids))
    hidden, top_ids, top_logp = features.frozen_pass(default_model, windows, tuple(h.n_layers for h in heads), 1)
    feats = features.Features(hidden, top_ids, top_logp)
    assert windows.answer_tokens >= 300
    for head in heads:
        trained = agreement(default_model, head, windows, feats)
        untrained = agreement(default_model, exits.untrained_exit(default_model.model, head.n_layers), windows, feats)
        assert trained >= untrained + 0.15, (head.path.name, trained, untrained)
        assert abs(trained - head.manifest["heldout_agreement"]) < 0.15, (head.path.name, trained)
