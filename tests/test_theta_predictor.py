"""Calibrated TS's θ_M predictor (EESD eq. 5): the engine feeds it the same states the trainer learns from,
the fit learns what it can, the shipped predictors beat a constant on held-out prompts, and cali-ts uses them."""

import json
from pathlib import Path

import pytest
import torch

import explorer
from explorer.methods.eesd import exits
from explorer.methods.eesd.self_draft import SelfSpeculation
from explorer.errors import ExplorerError
from explorer.methods.eesd.theta_predictor import MAX_STEP, ThetaPredictor, find_predictor, load_predictor, save_predictor
from explorer.methods.eesd import train_theta as theta
from explorer.train.data import Sample

HELDOUT_FILE = Path(__file__).parent / "data" / "heldout_answers.json"


def test_engine_states_are_the_trainers_features(default_model):
    """H^(T) at the position that produced the round's last committed token and H^(D) of the latest draft step
    are the rows ``round_examples`` builds its examples from (fp32, 1e-4)."""
    model = default_model.model
    head = exits.exit_for(model, 4)
    assert head.trained
    ids = default_model.encode("Name three rivers in Europe.") + [1254, 2841, 30, 216, 5, 9]
    with torch.inference_mode():
        out = model(torch.tensor([ids]), output_hidden_states=True)
        top = out.hidden_states[-1][0]
        x = theta._exit_states(explorer.engine.forward.decoder_parts(model), head, out.hidden_states[4])
    shared = SelfSpeculation(model, head, default_model.device)
    committed = len(ids) - 3
    shared.verify_logits(ids[:committed], 1)  # the last round's verification
    for step in range(3):  # draft steps 1..3 read the committed tokens + the earlier drafts
        shared.draft_logits(ids[: committed + step])
        h_target, h_draft = shared.theta_states(step)
        assert (h_target - top[committed - 2]).abs().max() < 1e-4
        assert (h_draft - x[committed + step - 1]).abs().max() < 1e-4


def test_examples_label_a_step_accepted_only_when_the_whole_round_so_far_matches():
    out = {"step": [], "h_target": [], "h_draft": [], "label": []}
    top = torch.arange(8.0)[:, None].repeat(1, 2)  # (T, H): row p holds p
    agree = torch.tensor([True, True, False, True, True, True, True])  # positions 0..6
    theta._add_examples(out, top, top.clone(), agree, first=1)
    step, h_t, h_d, label = (torch.cat(out[k]) for k in ("step", "h_target", "h_draft", "label"))
    one = step == 1
    assert h_d[one][:, 0].tolist() == [1, 2, 3, 4, 5, 6] and h_t[one][:, 0].tolist() == [0, 1, 2, 3, 4, 5]
    assert label[one].tolist() == [1, 0, 1, 1, 1, 1]
    two = step == 2  # the round's first draft reads p - 1 >= 1
    assert h_d[two][:, 0].tolist() == [2, 3, 4, 5, 6] and label[two].tolist() == [0, 0, 1, 1, 1]
    assert step.max() <= MAX_STEP


def test_fit_learns_a_separable_signal_and_auc_is_the_rank_statistic():
    g = torch.Generator().manual_seed(0)
    n, h = 2000, 8
    h_target, h_draft = torch.randn(n, h, generator=g), torch.randn(n, h, generator=g)
    label = (h_draft[:, 0] + 0.5 * h_target[:, 1] > 0).float()
    data = {"step": torch.randint(1, 12, (n,), generator=g), "h_target": h_target, "h_draft": h_draft, "label": label}
    predictor, losses = theta.fit(data, steps=300, lr=0.05)
    assert losses[-1] < 0.5 * losses[0]
    scores = theta.evaluate(predictor, data, float(label.mean()))
    assert scores["auc"] > 0.95 and scores["log_loss"] < scores["log_loss_constant"]
    assert theta._auc(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0.0, 0.0, 1.0, 1.0])) == 0.75


def test_save_load_roundtrip_and_refusals(tmp_path):
    tiny, other = explorer.load("tiny-random:0:4"), explorer.load("tiny-random:1:4")
    p = ThetaPredictor(torch.randn(MAX_STEP, 32), torch.randn(32), torch.tensor(0.3))
    path = save_predictor(p, tiny.model, 2, tmp_path, {"note": "test"})
    assert find_predictor(tiny.model, 2, tmp_path) == path and find_predictor(tiny.model, 3, tmp_path) is None
    loaded = load_predictor(tiny.model, path)
    assert torch.equal(loaded.u, p.u) and loaded(12, torch.ones(32), torch.ones(32)) == p(10, torch.ones(32), torch.ones(32))
    with pytest.raises(ExplorerError, match="another model"):
        load_predictor(other.model, path)
    path.write_bytes(b"not safetensors")
    with pytest.raises(ExplorerError, match="cannot read"):
        load_predictor(tiny.model, path)
    with pytest.raises(ExplorerError, match="trained exit"):
        theta.train_theta(tiny, [exits.untrained_exit(tiny.model, 2)], [], progress=lambda *a: None)


def _shipped_predictors(model):
    return [(n, p) for n in range(1, 30) if (p := find_predictor(model, n)) is not None]


def test_shipped_predictors_rank_heldout_draft_steps_and_beat_the_prior(default_model):
    shipped = _shipped_predictors(default_model.model)
    assert shipped, "no θ_M predictor ships for the default model in assets/early-exit/"
    rows = json.loads(HELDOUT_FILE.read_text())["samples"]
    samples = [Sample(tuple(r["prompt_ids"]), tuple(r["answer_ids"]), r["prompt_id"], "heldout", "greedy")
               for r in rows]
    heads = [exits.exit_for(default_model.model, n) for n, _ in shipped]
    examples = theta.round_examples(default_model, heads, samples, progress=lambda *a: None)
    for n, path in shipped:
        predictor = load_predictor(default_model.model, path)
        data = examples[n]
        scores = theta.evaluate(predictor, data, 0.5)  # cali-ts's θ_M without a predictor: θ̂₀ = 0.5
        assert scores["log_loss"] < scores["log_loss_constant"] and scores["auc"] > 0.8, (path.name, scores)


def test_cali_ts_uses_the_shipped_predictor_and_stays_lossless(default_model):
    n, _ = _shipped_predictors(default_model.model)[0]
    prompt = "List four colours of the rainbow."
    cali = explorer.decode(default_model, prompt, method="speculative", draft=f"early-exit:{n}",
                           controller="cali-ts", gamma=6, max_new_tokens=24)
    ar = explorer.decode(default_model, prompt, method="ar", max_new_tokens=24)
    assert cali.output_ids == ar.output_ids
    assert "θ_M predictor" in cali.draft_about
    scores = [t for r in cali.rounds if r.controller for t in r.controller.get("theta_model", [])]
    assert scores and all(0 < t < 1 for t in scores) and len({round(t, 6) for t in scores}) > 3
