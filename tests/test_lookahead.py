"""Lookahead decoding (``explorer/methods/lookahead``): the window's mask makes every guess a Jacobi update (its
logits are the target's after the chain of guesses it sees, checked against a plain forward); columns become
n-grams and the pool keeps the newest G per first token; the guesses merge into one tree; decoding is lossless
(greedy == ``ar`` on the real model and tiny ones, sampled tokens follow the target: χ²); the trace's details
are checked on load and the view shows a stranger's token text as text."""

import json

import numpy as np
import pytest
import torch
from helpers import chi_square_pvalue, exact_two_token_distribution

import explorer
from explorer.engine.cache import new_cache
from explorer.engine.forward import lm_head
from explorer.engine.sampling import SamplingConfig
from explorer.engine.tree import SideRows, TokenTree, verify_tree
from explorer.methods import parse_system
from explorer.methods.lookahead.window import Pool, Window, trie
from explorer.viz.views.lookahead import rounds_figure, window_html

RUNS = 800  # seeded runs for the χ² test (each a decode of 2 tokens)


def test_each_guess_sees_a_run_of_consecutive_positions():
    window = Window(4, 4, [5, 6, 7], seed=0)
    for _ in range(2):
        window.step([1, 2, 3, 4])
    tokens, offsets, visible = window.rows()
    assert len(tokens) == 3 * 4 and window.full
    for row in range(len(tokens)):
        seen = sorted(offsets[v] for v in visible[row].nonzero().flatten().tolist())
        assert seen == list(range(1, offsets[row] + 1))  # positions +1 … its own, one row each


def test_the_window_rows_are_jacobi_updates_of_the_target(tiny_target):
    """Side rows' logits equal a plain causal forward over the context and the chain of guesses each sees; the
    tree's rows are untouched by them."""
    window = Window(3, 4, [4, 9, 11], seed=1)
    window.step([2, 8, 5])
    window.step([6, 1, 3])
    tokens, offsets, visible = window.rows()
    context = [3, 7, 1, 12, 9]
    tree = TokenTree.build([10, 11, 12], [-1, 0, -1])
    model = tiny_target.model
    verified = verify_tree(model, lm_head(model), new_cache(), 0, context, tree, SamplingConfig(1.0),
                           SideRows(tuple(tokens), tuple(offsets), visible))
    with torch.inference_mode():
        for row in range(len(tokens)):
            chain = [tokens[v] for v in sorted(visible[row].nonzero().flatten().tolist(), key=lambda v: offsets[v])]
            plain = model(torch.tensor([context + chain])).logits[0, -1]
            assert torch.allclose(verified.side_logits[row], plain, atol=1e-4)
        plain_tree = model(torch.tensor([context + [10, 11]])).logits[0, -2:]
        assert torch.allclose(verified.p[1], torch.softmax(plain_tree[0], -1), atol=1e-5)  # after node 0 (token 10)


def test_columns_become_ngrams_once_the_window_is_full():
    window = Window(2, 3, [9], seed=0)
    assert window.levels == [[9, 9]] and not window.full
    assert window.step([1, 2]) == [] and window.full  # warm-up: the second level fills
    assert window.step([3, 4]) == [(9, 1, 3), (9, 2, 4)]  # column j from level 0 up, then its output
    assert window.levels == [[1, 2], [3, 4]]


def test_the_pool_keeps_the_newest_guesses_per_first_token():
    pool = Pool(per_key=2)
    assert pool.add([(1, 2, 3), (1, 4, 5), (1, 2, 3)]) == 2  # a repeat is not new, but becomes the newest
    assert pool.candidates(1) == [((2, 3), "window"), ((4, 5), "window")]
    pool.add([(1, 6, 7)])
    assert pool.candidates(1) == [((6, 7), "window"), ((2, 3), "window")] and len(pool) == 2
    assert pool.candidates(2) == []
    pool.MAX_KEYS = 2  # the oldest first tokens drop first, and the count follows
    pool.add([(2, 1, 1), (3, 1, 1), (3, 2, 2)])
    assert pool.candidates(1) == [] and len(pool) == 3 == sum(len(kept) for kept in pool.grams.values())
    seeded = Pool(4)
    assert seeded.add_text([5, 6, 5, 7], 2) == 3 and seeded.candidates(5) == [((7,), "prompt"), ((6,), "prompt")]


def test_guesses_merge_into_one_tree():
    tokens, parents, share, ends = trie([(1, 2), (1, 3), (4, 5)], room=2)
    assert tokens == [1, 2, 3, 4, 5] and parents == [-1, 0, 0, -1, 3]
    assert share == pytest.approx([2 / 3, 1 / 3, 1 / 3, 1 / 3, 1 / 3]) and ends == [1, 2, 4]
    assert trie([(1, 2), (1, 3)], room=1)[0] == [1]  # cut to the room the round has left


@pytest.mark.parametrize("kwargs", [{}, {"lookahead_pool": "window", "lookahead_window": 3, "lookahead_ngram": 3,
                                         "lookahead_guesses": 3},
                                    {"lookahead_window": 1, "lookahead_ngram": 2, "lookahead_guesses": 1},
                                    {"lookahead_window": 6, "lookahead_ngram": 5, "lookahead_guesses": 6}])
def test_greedy_lookahead_equals_ar_on_a_tiny_model(kwargs):
    target = explorer.load("tiny-random:51")
    prompt = "the cat sat on the mat. the cat sat on the mat. the"
    ar = explorer.decode(target, prompt, method="ar", max_new_tokens=30)
    run = explorer.decode(target, prompt, method="lookahead", max_new_tokens=30, **kwargs)
    assert run.output_ids == ar.output_ids
    assert run.summary.accepted > 0 and run.summary.tokens_per_target_forward > 1


def test_sampled_lookahead_tokens_follow_the_target(tiny_target):
    """The prompt's own 2-grams after its last token guess the target's three likeliest first tokens: guesses
    are accepted and refused, and the first two tokens still follow the target's exact distribution."""
    cfg = SamplingConfig(0.8, top_k=8)
    p0 = exact_two_token_distribution(tiny_target, cfg, [1, 5, 1])[0]
    a, b, c = (int(x) for x in np.argsort(p0)[-3:])
    prefix = [1, a, 1, b, 1, c, 1]
    p0, p1 = exact_two_token_distribution(tiny_target, cfg, prefix)
    counts, accepted = np.zeros((2, p0.shape[0])), 0
    for seed in range(RUNS):
        t = explorer.decode(tiny_target, prompt_ids=prefix, method="lookahead", lookahead_window=2,
                            lookahead_ngram=3, lookahead_guesses=3, max_new_tokens=2, temperature=cfg.temperature,
                            top_k=cfg.top_k, seed=seed)
        counts[0, t.output_ids[0]] += 1
        counts[1, t.output_ids[1]] += 1
        accepted += t.summary.accepted
    assert 0.2 < accepted / RUNS < 1.5  # guesses accepted on many runs, not all
    assert chi_square_pvalue(counts[0], p0) > 1e-3 and chi_square_pvalue(counts[1], p1) > 1e-3


def test_the_bench_and_race_grammar_and_bad_options():
    assert parse_system("lookahead") == {"method": "lookahead"}
    assert parse_system("lookahead:5:4:3") == {"method": "lookahead", "lookahead_window": 5, "lookahead_ngram": 4,
                                               "lookahead_guesses": 3}
    with pytest.raises(explorer.ExplorerError, match="lookahead"):
        parse_system("lookahead:wide")
    with pytest.raises(explorer.ExplorerError, match="lookahead_ngram"):
        explorer.decode("tiny-random", "hi", method="lookahead", lookahead_ngram=1)


def test_a_traces_details_are_checked_and_its_text_shown_as_text():
    trace = explorer.decode("tiny-random", "the cat sat on the mat. the cat sat on the", method="lookahead",
                            max_new_tokens=16)
    data = json.loads(trace.to_json())
    guessed = next(i for i, r in enumerate(trace.rounds) if r.detail["guesses"] and r.detail["collected"])
    token = trace.rounds[guessed].detail["guesses"][0][0]
    data["token_text"][str(token)] = "<img src=x onerror=alert(1)>"
    shown = explorer.load_trace(json.dumps(data))
    page = window_html(shown, guessed)
    assert "<img" not in page and "&lt;img" in page and "Jacobi" in page and "target followed" in page
    assert rounds_figure(shown, guessed).layout.title.text.startswith("Lookahead decoding")
    bad = json.loads(json.dumps(data))
    bad["rounds"][guessed]["detail"]["levels"][0].append(5)  # one level wider than the others
    with pytest.raises(explorer.ExplorerError, match="equally wide"):
        explorer.load_trace(json.dumps(bad))
    data["rounds"][guessed]["detail"]["guesses"] = [[1]] * 40  # more guesses than G may be
    with pytest.raises(explorer.ExplorerError, match="guesses"):
        explorer.load_trace(json.dumps(data))


def test_greedy_lookahead_equals_ar_on_the_default_model(default_model):
    prompt = "Write the multiplication table of 7 from 7 x 1 to 7 x 10, one per line."
    ar = explorer.decode(default_model, prompt, method="ar", max_new_tokens=48)
    for shape in ({}, {"lookahead_window": 3, "lookahead_ngram": 4, "lookahead_guesses": 3}):
        run = explorer.decode(default_model, prompt, method="lookahead", max_new_tokens=48, **shape)
        assert run.output_ids == ar.output_ids and run.summary.accepted > 0
    assert "Jacobi window of 3 × 3 guesses" in run.draft_about


def test_a_round_with_more_nodes_than_its_guesses_hold_is_refused():
    """Issue 40, item 3: a round verifies the trie of at most G guesses of N − 1 tokens (32 nodes at the options'
    largest), but the trace checks let a forged round hold 1 024 nodes (a 1.19 M-cell mask figure)."""
    from explorer.tools.forged_traces import LOOKAHEAD_MOST_NODES, OVERSIZED_NODES, lookahead_text

    explorer.load_trace(lookahead_text(LOOKAHEAD_MOST_NODES))  # the largest a run can write still loads
    with pytest.raises(explorer.TraceFormatError, match="guess") as err:
        explorer.load_trace(lookahead_text(OVERSIZED_NODES))
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


def test_the_mask_view_draws_at_most_the_shared_cap_of_rows():
    """The mask is capped as BiTA's is (the same constant), whatever a trace built in-process holds."""
    import dataclasses

    from explorer.tools.forged_traces import LOOKAHEAD_MOST_NODES, OVERSIZED_NODES, lookahead_text
    from explorer.viz.views import MAX_MASK_DRAWN
    from explorer.viz.views.lookahead import mask_figure

    legal = explorer.load_trace(lookahead_text(LOOKAHEAD_MOST_NODES))
    index = next(i for i, r in enumerate(legal.rounds) if r.tree and len(r.tree["nodes"]) == LOOKAHEAD_MOST_NODES)
    rows = len(mask_figure(legal, index).data[0].z)
    assert rows == 1 + LOOKAHEAD_MOST_NODES + 4 * 16  # all of the largest legal round
    big = json.loads(lookahead_text(OVERSIZED_NODES))["rounds"][index]["tree"]
    rounds = list(legal.rounds)
    rounds[index] = dataclasses.replace(rounds[index], tree=big)
    fig = mask_figure(dataclasses.replace(legal, rounds=tuple(rounds)), index)
    z = fig.data[0].z
    assert len(z) == MAX_MASK_DRAWN and all(len(row) == MAX_MASK_DRAWN for row in z)
    assert f"first {MAX_MASK_DRAWN}" in fig.layout.title.text and len(fig.to_json()) < 8 * 2**20
