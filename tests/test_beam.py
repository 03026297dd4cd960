"""Speculative beam search (004 Algorithm 2; Leviathan et al. A.4): the exact rule's output is Hugging Face's
beam search on the target, token for token (the default model with an early exit; tiny models with a
model draft, end-of-sequence candidates included); the 004 rule branches after each beam's verified draft;
the trace tells the best beam's history and keeps every step's beams; its tree view; the sweep."""

from __future__ import annotations

import json

import pytest

import explorer
from explorer import bench, cli, sweep
from explorer.hf_systems import hf_beam_search
from explorer.methods.beam import TargetBeams
from explorer.viz.views.beam import beam_nodes, beam_tree_figure

PROMPTS = ("Write one sentence about the ocean.", "What is 2 + 2? Answer briefly.", "List three colours.")


@pytest.mark.parametrize("width", [1, 3])
def test_the_exact_rule_is_hugging_face_beam_search(default_model, width):
    ended = 0
    for prompt in PROMPTS:  # two texts that run to the token cap and one that ends (at 7 and 8 tokens)
        t = explorer.decode(default_model, prompt, method="beam", draft="early-exit:4", beam_width=width,
                            max_new_tokens=20)
        hf, _ = hf_beam_search(default_model, list(t.prompt_ids), width, 20)
        assert list(t.output_ids) == hf
        ended += t.summary.stop_reason == "eos"
        assert explorer.load_trace(t.to_json()) == t
    assert ended  # one of the prompts ends its text: the finished-beam rules were exercised


def test_the_exact_rule_is_beam_search_on_tiny_models_with_a_model_draft(tiny_target):
    kinds = []
    # a draft that disagrees (another seed, one layer), the target's own model, and its own weights in 4 bits
    for draft in ("model:tiny-random:2:1", "model:tiny-random:1", "int4"):
        for prefix in ("ab", "hello", "xyz q", "the cat", "no, yes!"):
            for width in (2, 4):
                t = explorer.decode(tiny_target, prefix, method="beam", draft=draft, beam_width=width, gamma=3,
                                    max_new_tokens=12)
                hf, _ = hf_beam_search(tiny_target, list(t.prompt_ids), width, 12)
                assert list(t.output_ids) == hf, (draft, prefix, width)
                kinds += [k for r in t.rounds for k in r.detail["beam"]["kinds"]]
    assert {"accepted", "corrected", "bonus"} <= set(kinds)


def test_a_draft_step_is_accepted_only_when_the_target_keeps_the_same_beams(default_model):
    t = explorer.decode(default_model, "Count from 1 to 20.", method="beam", draft="early-exit:12", beam_width=2,
                        gamma=4, max_new_tokens=16)
    kinds = [k for r in t.rounds for k in r.detail["beam"]["kinds"]]
    assert "accepted" in kinds and ("corrected" in kinds or "bonus" in kinds)
    for r in t.rounds:
        beam = r.detail["beam"]
        assert beam["kinds"][: r.n_accepted] == ["accepted"] * r.n_accepted
        for layer in beam["layers"]:  # at most k run on; every candidate ranked by its score
            assert sum(node["kept"] for node in layer) <= 2
            scores = [node["score"] for node in layer if node["kept"]]
            assert scores == sorted(scores, reverse=True)
    # the best beam's probabilities are the target's: its log-probability is its last node's score
    best = [node for r in t.rounds for layer, b in zip(r.detail["beam"]["layers"], r.detail["beam"]["best"])
            for i, node in enumerate(layer) if i == b]
    logp = sum(__import__("math").log(p) for r in t.rounds for p in r.p_emitted)
    assert abs(best[-1]["score"] - logp) < 1e-2


@pytest.mark.parametrize("rule", ["exact", "004"])
def test_rounds_stream_while_the_search_runs_and_a_stop_keeps_a_prefix(default_model, rule):
    """Issue 25: the search runs on the round driver, so its rounds reach the page as they settle, not at
    the end, and a consumer that stops after a round stops the search there."""
    options = dict(method="beam", draft="early-exit:4", beam_width=3, beam_rule=rule, max_new_tokens=24)
    whole = explorer.decode(default_model, PROMPTS[0], **options)
    decoding = explorer.stream(default_model, PROMPTS[0], **options)
    items = decoding.steps()
    heartbeats = 0
    for item in items:
        if item is not None:
            break
        heartbeats += 1
    searched = sum(len(r.detail["beam"]["layers"]) + r.detail["beam"].get("after", {}).get("steps", 0)
                   for r in whole.rounds)
    assert heartbeats < len(whole.rounds) and heartbeats < searched  # the first round came before the search ended
    stopped = decoding.trace()
    assert stopped.summary.stop_reason == "stopped" and 1 == len(stopped.rounds)
    assert whole.output_ids[: len(stopped.output_ids)] == stopped.output_ids  # a prefix of the whole text
    assert [r.emitted for r in stopped.rounds] == [r.emitted for r in whole.rounds[:1]]
    items.close()


def test_the_004_rule_branches_after_each_verified_draft(default_model):
    t = explorer.decode(default_model, PROMPTS[0], method="beam", draft="prompt-lookup:2", beam_width=3,
                        beam_rule="004", max_new_tokens=16)
    assert t.settings.options == {"width": 3, "rule": "004"} and t.summary.new_tokens > 0
    assert explorer.load_trace(t.to_json()) == t
    for r in t.rounds:
        (layer,) = r.detail["beam"]["layers"]
        assert r.detail["beam"]["kinds"] == ["branch"]
        assert len(layer) <= 3 * 3 and sum(node["kept"] for node in layer) <= 3
    t = explorer.decode(default_model, PROMPTS[0], method="beam", draft="early-exit:4", beam_width=1, beam_rule="004",
                        max_new_tokens=16)
    assert t.output_ids == explorer.decode(default_model, PROMPTS[0], max_new_tokens=16).output_ids  # k = 1: greedy


def test_bad_settings_get_one_line(default_model):
    with pytest.raises(explorer.ExplorerError, match="the draft must give distributions"):
        explorer.decode(default_model, PROMPTS[0], method="beam", draft="prompt-lookup:3", max_new_tokens=4)
    with pytest.raises(explorer.ExplorerError, match="set temperature 0"):
        explorer.decode(default_model, PROMPTS[0], method="beam", draft="early-exit:4", temperature=0.7)
    with pytest.raises(explorer.ExplorerError, match="beam_width .*from 1 to 8"):
        explorer.decode(default_model, PROMPTS[0], method="beam", draft="early-exit:4", beam_width=9)
    with pytest.raises(explorer.ExplorerError, match="beam_rule must be one of exact, 004"):
        explorer.decode(default_model, PROMPTS[0], method="beam", draft="early-exit:4", beam_rule="fast")


def test_a_forged_beam_step_is_refused(default_model):
    t = explorer.decode(default_model, PROMPTS[2], method="beam", draft="early-exit:4", beam_width=2, max_new_tokens=6)
    data = json.loads(t.to_json())
    beam = data["rounds"][0]["detail"]["beam"]
    for forge, message in ((("rule", "greedy"), "beam\\.rule must be one of exact, 004"),
                           (("kinds", ["maybe"]), "beam\\.kinds must be a list of step kinds .*kinds\\[0\\] is 'maybe'"),
                           (("best", [99] * len(beam["layers"])), "best\\[0\\] must be -1"),
                           (("layers", [[{"parent": 0, "tokens": [], "score": 0, "kept": True, "finished": False}]]),
                            "layers\\[0\\]\\[0\\]\\.tokens must be a list of 1 to 17 token ids")):
        forged = json.loads(json.dumps(data))
        forged["rounds"][0]["detail"]["beam"][forge[0]] = forge[1]
        if forge[0] == "layers":
            forged["rounds"][0]["detail"]["beam"].update(kinds=["target"], best=[0])
        with pytest.raises(explorer.ExplorerError, match=message):
            explorer.load_trace(json.dumps(forged))


def test_the_tree_view_draws_every_step_and_escapes_token_text(default_model):
    t = explorer.decode(default_model, PROMPTS[2], method="beam", draft="early-exit:4", beam_width=3, max_new_tokens=10)
    assert "beam-tree" in {v.name for v in explorer.viz.views_for(t)}
    points, edges = beam_nodes(t)
    assert len(points) == sum(len(layer) for r in t.rounds for layer in r.detail["beam"]["layers"])
    best = [p for p in points if p["best"]]
    assert [p["x"] for p in best] == list(range(1, len(t.output_ids) + 1))  # the best beam, one token per step
    assert beam_nodes(t, 0) == (points, edges)  # opened on its first round, a short run shows every step
    forged = t.__class__(**{**t.__dict__, "token_text": {**t.token_text, t.output_ids[0]: "<b>x</b>"}})
    fig = beam_tree_figure(forged, 0)
    shown = " ".join(str(x) for trace in fig.data for x in [*(trace.text or ()), *(trace.customdata or ())])
    assert "<b>x</b>" not in shown and "&lt;b&gt;x&lt;/b&gt;" in shown


def test_hugging_face_rules_finish_a_beam_on_its_end_token():
    beams = TargetBeams(2, {0}, 10)
    import torch
    logprobs = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))  # token 0 ends the text
    candidates = beams.step(logprobs, (0, 0))
    assert [c.tokens for c in candidates if c.finished] == [(0,)]  # ranked first: it finishes
    assert [c.tokens for c in beams.running] == [(1,), (2,)]  # the next two run on
    assert beams.finished[0][0] == pytest.approx(torch.log(torch.tensor(0.5)).item())  # score / length 1


def test_the_beam_sweep_and_its_cli(default_model, capsys, tmp_path):
    report = sweep.run("beam", "default", "early-exit:4", {"widths": (2,)}, max_new_tokens=8, prompts=[PROMPTS[1]],
                       progress=lambda *a: None)
    rows = {p["system"]: p for p in report["points"]}
    assert set(rows) == {"hf-beam", "beam:exact", "beam:004"}
    assert rows["beam:exact"]["identical"] == 1 and rows["beam:exact"]["logprob"] == pytest.approx(rows["hf-beam"]["logprob"])
    assert "| 2 | beam:exact |" in sweep.table("beam", report)
    assert cli.main(["run", "--prompt", PROMPTS[1], "--method", "beam", "--draft", "early-exit:4", "--beam-width", "2",
                     "--max-new-tokens", "6", "--raw"]) == 0
    assert cli.main(["sweep", "beam", "--width", "0", "--out", str(tmp_path / "s.json")]) == 2
    assert "--width must be whole numbers from 1 to 8" in capsys.readouterr().err


def test_the_bench_runs_beam_systems_beside_hugging_face_beam_search(default_model):
    system = bench.parse_system("beam:004:3:prompt-lookup:3@2", 4, "fixed")
    assert (system.method, system.draft, system.gamma, dict(system.options)) == (
        "beam", "prompt-lookup:3", 2, {"beam_rule": "004", "beam_width": 3})
    for bad in ("beam:fast:3:early-exit:4", "beam:exact:9:early-exit:4", "beam:exact:3", "hf-beam:0", "hf-beam@2"):
        with pytest.raises(explorer.ExplorerError, match="unknown system|bad system|beam_width"):
            bench.parse_system(bad, 4, "fixed")
    prompts = [p for p in bench.load_prompts() if p["category"] == "qa"][:1]
    report = bench.run("default", ("hf-beam:2", "beam:exact:2:early-exit:4"), repeats=1, max_new_tokens=6,
                       prompts=prompts, progress=lambda *a: None)
    rows = {r["system"]: r for r in report["rows"]}
    assert rows["hf-beam:2"]["tokens_per_s"] > 0 and rows["beam:exact:2:early-exit:4"]["tokens_per_s"] > 0


@pytest.mark.parametrize("rule", ["exact", "004"])
def test_a_draft_with_a_row_scorer_drafts_every_beam_in_one_forward_a_step(tiny_target, monkeypatch, rule):
    """The same search as a draft run beam by beam, for fewer draft forwards (one a step, not one a beam a step)."""
    from explorer.methods.beam import rules

    options = dict(method="beam", draft="model:tiny-random:2", beam_width=4, beam_rule=rule, gamma=3,
                   max_new_tokens=12)
    runs = {}
    for way in ("one forward a step", "beam by beam"):
        if way == "beam by beam":
            build = rules.SpeculativeBeams.__init__

            def one_by_one(self, *args, **kwargs):
                build(self, *args, **kwargs)
                self.draft_rows = None

            monkeypatch.setattr(rules.SpeculativeBeams, "__init__", one_by_one)
        runs[way] = [explorer.decode(tiny_target, prompt, **options) for prompt in ("ab", "the cat", "no, yes!")]
    for batched, alone in zip(runs["one forward a step"], runs["beam by beam"]):
        assert batched.output_ids == alone.output_ids
        assert [r.detail["beam"]["layers"] for r in batched.rounds] == [r.detail["beam"]["layers"] for r in alone.rounds]
    forwards = {way: sum(r.draft_forwards for t in traces for r in t.rounds) for way, traces in runs.items()}
    assert forwards["one forward a step"] * 2 < forwards["beam by beam"], forwards
