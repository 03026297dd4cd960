"""Hierarchical speculative decoding (004 Algorithm 3): a draft drafted by a smaller draft, every level
verified exactly — greedy identical to ``ar``, sampled tokens distributed as the target's (χ², three
different models) — with its inner rounds and per-level forwards in the trace and its lanes on the page."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import PREFIX, chi_square_pvalue, exact_two_token_distribution

import explorer
from explorer import bench
from explorer.engine.sampling import SamplingConfig
from explorer.viz.views.hierarchical import hierarchical_lanes_html, level_totals

PROMPT = "Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox"
CHAINS = ("prompt-lookup:3>early-exit:4", "early-exit:4>early-exit:12", "prompt-lookup:2>early-exit:4>early-exit:12")


@pytest.fixture(scope="module")
def ar(default_model):
    return explorer.decode(default_model, PROMPT, max_new_tokens=24)


@pytest.mark.parametrize("chain", CHAINS)
@pytest.mark.parametrize("controller", ["fixed", "heuristic"])
def test_greedy_hierarchical_equals_ar(default_model, ar, chain, controller):
    t = explorer.decode(default_model, PROMPT, method="hierarchical", draft=chain, controller=controller,
                        max_new_tokens=24)
    assert t.output_ids == ar.output_ids and t.draft == chain
    levels = chain.split(">")
    drafting = [r for r in t.rounds if r.drafted]
    assert drafting and all(r.detail["levels"] == levels for r in drafting)
    for r in drafting:
        inner = r.detail["inner_rounds"]
        made = [tok for i in inner for tok in list(i["drafted"][: i["accepted"]]) + [i["next"]]]
        assert made[: len(r.drafted)] == list(r.drafted)  # the chain hands on exactly its levels' tokens
        assert r.detail["level_forwards"][-1] == len(inner)  # one forward of the upper draft per inner round
        # drafted tokens cost one step each; a draft cut after its end-of-sequence token keeps its cost
        assert r.draft_forwards >= len(r.drafted)
    assert t.summary.accepted > 0
    assert explorer.load_trace(t.to_json()) == t


def test_the_preset_chain_proposes_for_the_4_bit_copy_and_is_lossless(default_model, ar):
    """The preset (#49, measured 3-7 % ahead of quantized's): prompt lookup under the target's own 4-bit copy,
    quantized's schedule, 2 proposals an inner round."""
    t = explorer.decode(default_model, PROMPT, method="hierarchical", max_new_tokens=24)
    assert t.output_ids == ar.output_ids and t.draft == "prompt-lookup:3>int4"
    assert (t.settings.controller, t.settings.gamma, t.settings.options["inner_gamma"]) == ("heuristic", 8, 2)
    assert any(r.detail.get("level_seconds") for r in t.rounds)


def test_sampled_tokens_follow_the_target_with_three_models(tiny_target):
    cfg = SamplingConfig(1.0)
    p0, p1 = exact_two_token_distribution(tiny_target, cfg)
    counts = np.zeros((2, p0.shape[0]))
    inner_accepted = inner_tested = accepted = 0
    runs = 1500  # 4 new tokens: the first round drafts 3, so the small model drafts for the medium one
    for seed in range(runs):
        t = explorer.decode(tiny_target, prompt_ids=PREFIX, method="hierarchical",
                            draft="model:tiny-random:2:1>model:tiny-random:3", gamma=3, inner_gamma=2,
                            max_new_tokens=4, temperature=1.0, seed=seed)
        counts[0, t.output_ids[0]] += 1
        counts[1, t.output_ids[1]] += 1
        accepted += t.summary.accepted
        for r in t.rounds:
            for i in r.detail.get("inner_rounds", ()):
                inner_accepted += i["accepted"]
                inner_tested += min(i["accepted"] + 1, len(i["drafted"]))
    # both levels accept and refuse: every path of both accept rules is exercised
    assert 0.05 < inner_accepted / inner_tested < 0.95 and 0.05 < accepted / runs < 1.9
    assert chi_square_pvalue(counts[0], p0) > 1e-3
    assert chi_square_pvalue(counts[1], p1) > 1e-3


def test_sampled_tokens_follow_the_target_through_its_4_bit_copy(tiny_target):
    """The preset's shape (#49): a proposer under the target's own 4-bit copy, the copy drafting for the target;
    a model proposer, so that its q is a distribution the copy's accept test reads (prompt lookup's is one token).
    The first two tokens against the target's exact distribution (4 new tokens: the first round drafts 3, so the
    proposer proposes for the copy)."""
    cfg = SamplingConfig(1.0)
    p0, p1 = exact_two_token_distribution(tiny_target, cfg)
    counts = np.zeros((2, p0.shape[0]))
    inner_accepted = inner_tested = 0
    for seed in range(600):
        t = explorer.decode(tiny_target, prompt_ids=PREFIX, method="hierarchical", draft="model:tiny-random:2:1>int4",
                            controller="fixed", gamma=3, inner_gamma=2, max_new_tokens=4, temperature=1.0, seed=seed)
        counts[0, t.output_ids[0]] += 1
        counts[1, t.output_ids[1]] += 1
        for r in t.rounds:
            for i in r.detail.get("inner_rounds", ()):
                inner_accepted += i["accepted"]
                inner_tested += min(i["accepted"] + 1, len(i["drafted"]))
    assert 0.05 < inner_accepted / inner_tested < 0.95  # the copy accepts and refuses the proposer's tokens
    assert chi_square_pvalue(counts[0], p0) > 1e-3
    assert chi_square_pvalue(counts[1], p1) > 1e-3


def test_bad_chains_get_one_line(default_model):
    for draft, message in (("early-exit:4", "cannot run the draft .*is a chain, smallest first"),
                           ("early-exit:4>prompt-lookup:3", "prompt-lookup:3 cannot verify a smaller draft"),
                           ("a>b>c>d", "2 to 3 drafts"), ("early-exit:4>", "2 to 3 drafts")):
        with pytest.raises(explorer.ExplorerError, match=message):
            explorer.decode(default_model, PROMPT, method="hierarchical", draft=draft, max_new_tokens=4)
    with pytest.raises(explorer.ExplorerError, match="is a draft chain .*: run it with method hierarchical"):
        explorer.decode(default_model, PROMPT, draft=CHAINS[0], max_new_tokens=4)


def test_a_forged_inner_round_is_refused(default_model):
    t = explorer.decode(default_model, PROMPT, method="hierarchical", draft=CHAINS[0], max_new_tokens=12)
    data = json.loads(t.to_json())
    r = next(r for r in data["rounds"] if r["drafted"])
    r["detail"]["inner_rounds"][0]["accepted"] = 99
    with pytest.raises(explorer.ExplorerError, match="accepted must be a whole number up to the drafts"):
        explorer.load_trace(json.dumps(data))
    r["detail"]["inner_rounds"][0]["accepted"] = 0
    r["detail"]["level_forwards"] = [1]
    with pytest.raises(explorer.ExplorerError, match="level_forwards must hold one whole number per level"):
        explorer.load_trace(json.dumps(data))


def test_the_lanes_show_each_level_and_escape_token_text(default_model):
    t = explorer.decode(default_model, PROMPT, method="hierarchical", draft=CHAINS[1], max_new_tokens=16)
    assert "hierarchical-lanes" in {v.name for v in explorer.viz.views_for(t)}
    index = next(i for i, r in enumerate(t.rounds) if r.drafted)
    page = hierarchical_lanes_html(t, index)
    assert "early-exit:4" in page and "early-exit:12" in page and "target" in page and "Whole run" in page
    small, upper = level_totals(t)
    assert upper["accepted"] == t.summary.accepted and upper["tested"] == sum(r.tested for r in t.rounds)
    assert small["forwards"] > 0 and upper["forwards"] == sum(len(r.detail.get("inner_rounds", ())) for r in t.rounds)
    forged = t.__class__(**{**t.__dict__, "token_text": {**t.token_text, t.rounds[index].drafted[0]: "<b>x</b>"}})
    assert "<b>x</b>" not in hierarchical_lanes_html(forged, index) and "&lt;b&gt;x&lt;/b&gt;" in hierarchical_lanes_html(forged, index)


def test_the_bench_names_hierarchical_systems():
    system = bench.parse_system("hierarchical:prompt-lookup:3>early-exit:4/heuristic@6", 4, "fixed")
    assert (system.method, system.draft, system.controller, system.gamma) == (
        "hierarchical", "prompt-lookup:3>early-exit:4", "heuristic", 6)


def test_the_runs_summary_names_every_level_of_the_chain_not_only_the_top_one(tiny_target):
    """The page's 'Draft used' line is a draft's first clause (how each level runs is folded): a chain's must name
    its proposer, which it once left in the folded part ('int4: …' alone read as quantized's run)."""
    from explorer.viz.summary import draft_line, plain_and_technical

    t = explorer.decode(tiny_target, "hello there hello there", method="hierarchical", draft="prompt-lookup:3>int4",
                        inner_gamma=3, max_new_tokens=6)
    head, how = plain_and_technical(t.draft_about)
    assert head.startswith("prompt-lookup:3 proposing 3 tokens an inner round to int4: the target's own weights")
    assert "kernel" in how and "kernel" not in head
    assert "prompt\\-lookup:3 proposing 3 tokens" in draft_line(t)
