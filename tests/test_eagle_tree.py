"""EAGLE-2's dynamic draft tree (``explorer/methods/eagle_tree``): the rerank keeps the highest-valued nodes as
a tree; decoding is lossless (greedy == ``ar`` on the real model with the shipped head and on tiny models with
an untrained one; sampled tokens follow the target: χ²); the head's cache is cut back after every draft; the
trace's details are checked on load and the view shows a stranger's token text as text."""

import json

import numpy as np
import pytest
from helpers import PREFIX, chi_square_pvalue, exact_two_token_distribution

import explorer
from explorer.engine.sampling import SamplingConfig
from explorer.methods import parse_system
from explorer.methods.eagle_tree.step import Candidates
from explorer.viz.views.eagle_tree import rounds_figure, tree_html

RUNS = 800  # seeded runs per χ² test (each a decode of 2–3 tokens)


def test_the_rerank_keeps_the_best_valued_nodes_parents_first():
    made = Candidates()
    a = made.add(10, -1, 0.6)
    b = made.add(11, -1, 0.3)
    a1 = made.add(12, a, 0.9)  # value 0.54
    made.add(13, a, 0.1)  # 0.06
    b1 = made.add(14, b, 1.0)  # 0.3, ties its parent: made later, so after it
    assert made.value[a1] == pytest.approx(0.54) and made.depths[a1] == 2
    assert made.reranked(4) == [a, a1, b, b1]
    assert made.reranked(2) == [a, a1]
    assert made.reranked(1) == [a]


@pytest.mark.parametrize("seed", [61, 62])
def test_greedy_eagle_tree_equals_ar_on_a_tiny_model(seed):
    target = explorer.load(f"tiny-random:{seed}")
    prompt = "the cat sat on the mat. the cat sat on the"
    ar = explorer.decode(target, prompt, method="ar", max_new_tokens=30)
    for options in ({}, {"eagle_size": "paper", "eagle_top_k": 3, "eagle_depth": 4, "eagle_tokens": 8}):
        run = explorer.decode(target, prompt, method="eagle-tree", eagle_head="untrained", max_new_tokens=30,
                              **options)
        assert run.output_ids == ar.output_ids
    assert run.summary.drafted > 0 and max(len(r.tree["nodes"]) for r in run.rounds) == 8


@pytest.mark.parametrize("cfg", [SamplingConfig(1.0), SamplingConfig(0.8, top_k=8)])
def test_sampled_eagle_tree_tokens_follow_the_target(tiny_target, cfg):
    p0, p1 = exact_two_token_distribution(tiny_target, cfg)
    counts, accepted = np.zeros((2, p0.shape[0])), 0
    for seed in range(RUNS):
        t = explorer.decode(tiny_target, prompt_ids=PREFIX, method="eagle-tree", eagle_head="untrained",
                            eagle_size="paper", max_new_tokens=3, temperature=cfg.temperature, top_k=cfg.top_k,
                            seed=seed)
        counts[0, t.output_ids[0]] += 1
        counts[1, t.output_ids[1]] += 1
        accepted += t.summary.accepted
    # the first round has no target features to draft from; the second drafts for the second token
    assert accepted > 0  # which came through the tree on some runs
    assert chi_square_pvalue(counts[0], p0) > 1e-3 and chi_square_pvalue(counts[1], p1) > 1e-3


def test_the_bench_grammar_and_bad_options():
    assert parse_system("eagle-tree") == {"method": "eagle-tree"}
    assert parse_system("eagle-tree:12:3:5") == {"method": "eagle-tree", "eagle_tokens": 12, "eagle_top_k": 3,
                                                 "eagle_depth": 5}
    with pytest.raises(explorer.ExplorerError, match="eagle-tree"):
        parse_system("eagle-tree:many")
    with pytest.raises(explorer.ExplorerError, match="eagle_top_k"):
        explorer.decode("tiny-random", "hi", method="eagle-tree", eagle_top_k=0)
    with pytest.raises(explorer.ExplorerError, match="train feature-head"):
        explorer.decode("tiny-random", "hi", method="eagle-tree")  # no head ships for a tiny model


def test_a_traces_details_are_checked_and_its_text_shown_as_text():
    trace = explorer.decode("tiny-random", "the cat sat on the mat. the cat sat on the", method="eagle-tree",
                            eagle_head="untrained", eagle_size="paper", max_new_tokens=16)
    data = json.loads(trace.to_json())
    drafted = next(i for i, r in enumerate(trace.rounds) if r.tree and r.tree["nodes"])
    token = trace.rounds[drafted].tree["nodes"][0]["token"]
    data["token_text"][str(token)] = "<img src=x onerror=alert(1)>"
    shown = explorer.load_trace(json.dumps(data))
    page = tree_html(shown, drafted)
    assert "<img" not in page and "&lt;img" in page and "confidence" in page and "value" in page
    assert rounds_figure(shown, drafted).layout.title.text.startswith("EAGLE-2")
    data["rounds"][drafted]["detail"]["value"] = [2.0]  # a value is a probability
    with pytest.raises(explorer.ExplorerError, match="value"):
        explorer.load_trace(json.dumps(data))


def test_greedy_eagle_tree_equals_ar_on_the_default_model(default_model):
    """The shipped head, on a prompt it was not trained on; the tree gives more than one token per forward."""
    prompt = "Explain in two sentences why the sky is blue."
    ar = explorer.decode(default_model, prompt, method="ar", max_new_tokens=48)
    priced = explorer.decode(default_model, prompt, method="eagle-tree", max_new_tokens=48)
    assert priced.output_ids == ar.output_ids  # its trees' sizes follow this machine's clock
    run = explorer.decode(default_model, prompt, method="eagle-tree", eagle_size="paper", max_new_tokens=48)
    assert run.output_ids == ar.output_ids
    assert run.summary.tokens_per_target_forward > 1.2  # every tree of m = 4 nodes: 1.42 over three other prompts
    assert "trained feature head" in run.draft_about
