"""BiTA (Lin et al. 2024): tree shapes, the tree attention mask and position ids (no model), the sampling
walk's distribution (hand-built probabilities), and on the real model: greedy output identical to ``ar``,
KV compaction equal to a cache computed from scratch, and the trace's ``tree``."""

import json

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

import explorer
from explorer.methods.bita.tokens import init_tokens, tokens_for
from explorer.methods.bita.tree import (BitaConfig, BitaStep, attention_allowed, bita_rounds, build_tree, compact_cache,
                                  position_ids, walk)
from explorer.engine.rounds import run_rounds
from explorer.engine.sampling import Rng, SamplingConfig
from explorer.trace import check_tree
from explorer.errors import ExplorerError


def candidates(m: int, k: int, base: int = 100) -> list[list[tuple[int, float]]]:
    """Synthetic mask predictions: depth d's top-k are tokens base + 10 d + r with falling q."""
    return [[(base + 10 * d + r, 0.5 / (r + 1)) for r in range(k)] for d in range(1, m + 1)]


def ancestors_or_self(layout, node: int) -> set[int]:
    out = set()
    while node >= 0:
        out.add(node)
        node = layout.parents[node]
    return out


# -- tree shapes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("m,k", [(3, 3), (4, 2), (2, 5)])
def test_efficient_tree_expands_only_the_top1_node(m, k):
    layout = build_tree(BitaConfig("efficient", m, k), candidates(m, k), max_depth=10)
    assert layout.n_nodes == m * k
    for i in range(layout.n_nodes):
        kids = layout.children(i)
        assert (kids != []) == (layout.ranks[i] == 0 and layout.depths[i] < m), "only top-1 non-leaf nodes expand"
        assert all(layout.depths[c] == layout.depths[i] + 1 for c in kids)
    assert layout.groups == (-1, *range(layout.n_nodes)), "a mask group on the context and on every node"
    assert len(layout.positions) == layout.n_nodes + (layout.n_nodes + 1) * m


def test_full_tree_expands_every_candidate_and_straightforward_is_a_chain():
    full = build_tree(BitaConfig("full", 3, 2), candidates(3, 2), max_depth=10)
    assert full.n_nodes == 2 + 4 + 8
    assert sorted(full.depths) == [1] * 2 + [2] * 4 + [3] * 8
    chain = build_tree(BitaConfig("straightforward", 3, 4), candidates(3, 4), max_depth=10)
    assert chain.tokens == (110, 120, 130) and chain.parents == (-1, 0, 1) and chain.groups == (-1,)
    assert len(chain.positions) == 3 + 3  # the drafts and one mask group after the context


def test_tree_depth_is_capped_by_the_tokens_left():
    layout = build_tree(BitaConfig("efficient", 3, 3), candidates(3, 3), max_depth=1)
    assert set(layout.depths) == {1}
    assert build_tree(BitaConfig("efficient", 3, 3), candidates(3, 3), max_depth=0).n_nodes == 0


def test_config_refuses_what_it_cannot_do():
    for bad in (dict(tree="bushy"), dict(masks=0), dict(top_k=0), dict(masks=9), dict(tree="full", masks=5, top_k=6)):
        with pytest.raises(ExplorerError):
            BitaConfig(**({"tree": "efficient", "masks": 3, "top_k": 3} | bad))


# -- the attention mask and the position ids --------------------------------------------------------


@pytest.mark.parametrize("kind,m,k", [("efficient", 3, 3), ("full", 3, 2), ("straightforward", 4, 1),
                                      ("efficient", 2, 4)])
@pytest.mark.parametrize("n_prompt,n_cached,n_tail", [(16, 20, 1), (4, 0, 7), (0, 5, 1)])
def test_mask_each_node_sees_its_ancestors_itself_and_the_context(kind, m, k, n_prompt, n_cached, n_tail):
    layout = build_tree(BitaConfig(kind, m, k), candidates(m, k), max_depth=10)
    allowed = attention_allowed(layout, n_prompt, n_cached, n_tail)
    past = n_prompt + n_cached
    prompt_cols, context_cols = set(range(n_prompt)), set(range(n_prompt, past + n_tail))
    assert allowed.shape == (n_tail + len(layout.positions), past + n_tail + len(layout.positions))
    for row in range(n_tail):  # the context: causal, never the prompt tokens
        seen = set(torch.nonzero(allowed[row]).flatten().tolist())
        assert seen == set(range(n_prompt, past + row + 1))
    for t, (kind_t, node, slot) in enumerate(layout.positions):
        seen = set(torch.nonzero(allowed[n_tail + t]).flatten().tolist())
        tree = {past + n_tail + a for a in ancestors_or_self(layout, node)}
        if kind_t == "node":
            assert seen == context_cols | tree, f"node {node}"
        else:
            group = layout.group_start(node)
            own_masks = {past + n_tail + group + j for j in range(slot)}
            assert seen == prompt_cols | context_cols | tree | own_masks, f"mask {slot} of node {node}"


@pytest.mark.parametrize("kind", ["efficient", "full", "straightforward"])
def test_position_ids_are_depth_offsets(kind):
    layout = build_tree(BitaConfig(kind, 3, 2), candidates(3, 2), max_depth=10)
    n_cached, n_tail = 30, 1
    pos = position_ids(layout, n_cached, n_tail)
    last = n_cached + n_tail - 1
    assert pos[:n_tail] == [n_cached]
    for (kind_t, node, slot), p in zip(layout.positions, pos[n_tail:]):
        depth = layout.depths[node] if node >= 0 else 0
        assert p == last + depth + (slot if kind_t == "mask" else 0)


# -- the sampling walk ------------------------------------------------------------------------------


def test_sampling_walk_emits_tokens_distributed_as_the_target():
    """Tree drafts change how many draws one forward pays for, never what is drawn: the first emitted
    token follows p(·|context), the second p(·|context, first) (seeded chi-square, 20000 walks)."""
    v = 6
    layout = build_tree(BitaConfig("efficient", 2, 2), [[(1, .5), (2, .3)], [(3, .5), (4, .3)]], max_depth=5)
    gen = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(1 + layout.n_nodes, v, generator=gen), dim=-1)  # (1 + N, V)
    cfg = SamplingConfig(temperature=1.0)
    firsts, seconds_after_1 = [], []
    for _ in range(20000):
        path, token = walk(layout, p, cfg, gen)
        emitted = [layout.tokens[i] for i in path] + [token]
        firsts.append(emitted[0])
        if emitted[0] == 1 and len(emitted) > 1:
            seconds_after_1.append(emitted[1])
    observed = np.bincount(firsts, minlength=v)
    assert chisquare(observed, expected(p[0], len(firsts))).pvalue > 1e-3
    node_1 = layout.tokens.index(1)  # the top-1 node at depth 1: its row is p(·| context, 1)
    observed = np.bincount(seconds_after_1, minlength=v)
    assert chisquare(observed, expected(p[node_1 + 1], len(seconds_after_1))).pvalue > 1e-3


def expected(probs: torch.Tensor, n: int) -> np.ndarray:
    counts = probs.double().numpy() * n
    return counts * n / counts.sum()


def test_greedy_walk_takes_the_longest_matching_path():
    layout = build_tree(BitaConfig("efficient", 3, 2), candidates(3, 2), max_depth=5)
    p = torch.zeros(1 + layout.n_nodes, 200)
    p[0, 111] = 1  # the context's next token: the rank-1 sibling at depth 1 (a leaf)
    path, token = walk(layout, p, SamplingConfig(), None)
    assert [layout.tokens[i] for i in path] == [111] and layout.children(path[-1]) == []
    p[0, 111], p[0, 110] = 0, 1
    p[1, 120], p[layout.tokens.index(120) + 1, 131] = 1, 1  # 110 -> 120 -> 131 (rank 1 at depth 3)
    p[layout.tokens.index(131) + 1, 7] = 1
    path, token = walk(layout, p, SamplingConfig(), None)
    assert [layout.tokens[i] for i in path] == [110, 120, 131] and token == 7


# -- the real model ---------------------------------------------------------------------------------

PROMPTS = ["Why is the sky blue?", "Write a Python function that returns the n-th Fibonacci number."]
NEW = 20
# (tree, top-k, tokens, prompt index): every tree kind, trained (shipped) and untrained tokens
CASES = [("efficient", 3, "auto", 0), ("efficient", 3, "auto", 1), ("efficient", 3, "untrained", 0),
         ("efficient", 3, "untrained", 1), ("straightforward", 1, "auto", 0), ("full", 2, "auto", 1)]


@pytest.fixture(scope="module")
def ar_outputs(default_model):
    return {p: list(explorer.decode(default_model, p, method="ar", max_new_tokens=NEW).output_ids) for p in PROMPTS}


def run_bita(model, prompt_ids, cfg, tokens, n=NEW, sampling=SamplingConfig()):
    return [r for r, _ in bita_rounds(model, tokens, cfg, sampling, prompt_ids, n, Rng(0))]


@pytest.fixture(scope="module")
def bita_runs(default_model):
    runs = {}
    for kind, k, which, prompt in CASES:
        tokens = tokens_for(default_model.model, which, 3)
        runs[kind, k, which, prompt] = run_bita(default_model, default_model.encode(PROMPTS[prompt]),
                                                BitaConfig(kind, 3, k), tokens)
    return runs


@pytest.mark.parametrize("case", CASES, ids=["-".join(map(str, c)) for c in CASES])
def test_greedy_bita_equals_ar(ar_outputs, bita_runs, case):
    rounds = bita_runs[case]
    assert [t for r in rounds for t in r.emitted] == ar_outputs[PROMPTS[case[3]]]
    assert all(r.target_forwards == 1 for r in rounds)


def test_shipped_tokens_accept_more_than_untrained(default_model, bita_runs):
    """The shipped trained tokens emit more tokens per target forward than untrained ones, on both prompts
    (the same runs the lossless test checks)."""
    assert tokens_for(default_model.model, "auto", 3).trained
    for prompt in range(len(PROMPTS)):
        trained, untrained = bita_runs["efficient", 3, "auto", prompt], bita_runs["efficient", 3, "untrained", prompt]
        assert len(trained) < len(untrained), (prompt, len(trained), len(untrained))  # rounds = target forwards


def test_random_prompt_tokens_do_not_change_the_output(default_model, ar_outputs):
    """Large random prompt keys and values: the masks' drafts change, the target's tokens cannot."""
    tokens = init_tokens(default_model.model, 8, 3, seed=5)
    tokens = type(tokens)(tokens.prompt_keys * 50, tokens.prompt_values * 50, tokens.masks)
    ids = default_model.encode(PROMPTS[0])
    rounds = run_bita(default_model, ids, BitaConfig("efficient", 3, 2), tokens)
    assert [t for r in rounds for t in r.emitted] == ar_outputs[PROMPTS[0]]


def test_compaction_leaves_the_cache_a_fresh_forward_would_build(default_model):
    """After rounds that accepted tree nodes, the cache holds [prompt tokens | committed context except
    the pending token], equal (fp32, max abs difference < 1e-4) to the keys and values of one plain
    causal forward over those tokens."""
    model = default_model.model
    tokens = tokens_for(model, "auto", 3)
    ids = default_model.encode("Count from one to twenty: one, two, three, four,")
    cfg = BitaConfig("efficient", 3, 3)
    step = BitaStep(default_model, tokens, cfg, SamplingConfig(), Rng(0))
    gen = run_rounds(default_model.device, default_model.eos_token_ids, step, ids, 40)
    context = list(ids)
    accepted = 0
    for record, _ in gen:
        context += list(record.emitted)
        accepted += record.n_accepted
        if accepted >= 2 and record.n_accepted:
            break
    assert accepted >= 2, "the test needs rounds that accepted tree nodes"
    cache = step.cache
    n_prompt = tokens.n_prompt
    assert cache.get_seq_length() == n_prompt + len(context) - 1
    fresh = run_plain(model, context[:-1])
    for index, (layer, ref) in enumerate(zip(cache.layers, fresh.layers)):
        assert torch.allclose(layer.keys[:, :, n_prompt:], ref.keys, atol=1e-4)
        assert torch.allclose(layer.values[:, :, n_prompt:], ref.values, atol=1e-4)
        assert torch.equal(layer.keys[0, :, :n_prompt], tokens.prompt_keys[index])
    gen.close()


def run_plain(model, ids):
    from transformers import DynamicCache

    cache = DynamicCache()
    with torch.inference_mode():
        model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
    return cache


def test_compact_cache_keeps_the_prefix_and_the_chosen_rows():
    from transformers import DynamicCache

    keys = torch.arange(10.0).view(1, 1, 10, 1).repeat(1, 2, 1, 3)  # (B, G, S, D)
    cache = DynamicCache(ddp_cache_data=[(keys.clone(), -keys.clone())])
    compact_cache(cache, 4, [5, 8])
    assert cache.layers[0].keys[0, 0, :, 0].tolist() == [0, 1, 2, 3, 5, 8]
    assert cache.layers[0].values[0, 1, :, 0].tolist() == [0, -1, -2, -3, -5, -8]


def test_round_trace_carries_the_tree(default_model):
    trace = explorer.decode(default_model, PROMPTS[0], method="bita", bita_tree="efficient", bita_masks=3,
                            bita_top_k=2, max_new_tokens=12)
    assert explorer.trace.check_invariants(trace) == []
    first, later = trace.rounds[0], trace.rounds[1:]
    assert first.tree["nodes"] == [] and [p["kind"] for p in first.tree["positions"]] == ["mask"] * 3
    for r in later:
        tree = r.tree
        assert check_tree(tree) is None
        depth = max((n["depth"] for n in tree["nodes"]), default=0)
        assert depth <= 3 and len(tree["nodes"]) == 2 * depth  # top-2 per depth, only top-1 expanded
        assert [tree["nodes"][i]["token"] for i in tree["accepted_path"]][: r.n_accepted] == list(r.emitted[: r.n_accepted])
        for pos, row, sees in zip(tree["positions"], tree["attention"], tree["sees_prompt"]):
            assert sees == (pos["kind"] == "mask")
            if pos["kind"] == "node":
                assert row[pos["node"]] == "1"
    again = explorer.load_trace(trace.to_json())
    assert again == trace


def test_a_malformed_tree_is_refused(default_model):
    trace = explorer.decode(default_model, PROMPTS[0], method="bita", max_new_tokens=6)
    data = json.loads(trace.to_json())
    data["rounds"][1]["tree"]["attention"][0] = "2"
    with pytest.raises(explorer.TraceFormatError, match="tree"):
        explorer.load_trace(json.dumps(data))
    data = json.loads(trace.to_json())
    data["rounds"][1]["tree"]["nodes"][0]["parent"] = 5
    with pytest.raises(explorer.TraceFormatError, match="tree"):
        explorer.load_trace(json.dumps(data))
