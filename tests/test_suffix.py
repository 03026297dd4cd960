"""SuffixDecoding (``explorer/methods/suffix``): the suffix array finds the longest matching suffix and every
occurrence a brute-force search finds; the speculation tree's counts and probabilities are the corpus's; the
priced cut maximises expected tokens per cost; decoding is lossless (greedy == ``ar`` on the real model and tiny
ones, sampled tokens follow the target: χ²); a session's outputs are drafted for that session only; the
trace's details are checked on load and the views show a stranger's token text as text."""

import json

import numpy as np
import pytest
from helpers import PREFIX, chi_square_pvalue, exact_two_token_distribution

import explorer
from explorer.artifacts import fingerprint
from explorer.engine.sampling import SamplingConfig
from explorer.methods import parse_system
from explorer.methods.suffix.corpus import HISTORY, AnswerIndex, scan_match, speculate
from explorer.methods.suffix.step import priced
from explorer.viz.views.suffix import rounds_figure, tree_html

SEP = 99

RUNS = 800  # seeded runs per χ² test (each a decode of 2–3 tokens)


def brute_match(sequences, context, most=64):
    """The longest suffix of ``context`` occurring in any sequence, and where each occurrence continues."""
    best, where = 0, []
    for m in range(1, min(most, len(context)) + 1):
        pattern, found = context[-m:], []
        for s_index, seq in enumerate(sequences):
            for i in range(len(seq) - m + 1):
                if list(seq[i:i + m]) == pattern:
                    found.append((s_index, i + m))
        if not found:
            break
        best, where = m, found
    return best, where


def test_the_suffix_array_finds_the_longest_match_and_every_occurrence():
    rng = np.random.default_rng(0)
    sequences = [rng.integers(0, 6, rng.integers(5, 60)).astype(np.int32) for _ in range(40)]
    index = AnswerIndex.build(sequences, [f"s{i}" for i in range(40)], SEP)
    offsets = np.cumsum([0] + [len(s) + 1 for s in sequences[:-1]])
    for trial in range(60):
        context = rng.integers(0, 6, rng.integers(1, 12)).tolist()
        length, where = brute_match(sequences, context)
        match = index.match(context)
        if length == 0:
            assert match is None
            continue
        assert match.length == length and match.occurrences == len(where)
        assert sorted(match.starts.tolist()) == sorted(int(offsets[s] + end) for s, end in where)


def test_the_tree_counts_what_followed_the_match():
    """Three occurrences of 'a b': followed by c, c, d; after 'a b c' always e: the frequency-based scores."""
    a, b, c, d, e = 1, 2, 3, 4, 5
    index = AnswerIndex.build([np.array([a, b, c, e]), np.array([a, b, c, e, a]), np.array([a, b, d])],
                              ["x", "y", "z"], SEP)
    match = index.match([9, a, b])
    assert match.length == 2 and match.occurrences == 3
    tree = speculate(match, 8, 0.1, SEP)
    nodes = dict(zip(zip(tree.parents, tree.tokens), zip(tree.probs, tree.counts)))
    assert nodes[(-1, c)] == pytest.approx((2 / 3, 2)) and nodes[(-1, d)] == pytest.approx((1 / 3, 1))
    assert nodes[(tree.tokens.index(c), e)] == pytest.approx((2 / 3, 2))  # both c's went on to e
    assert tree.score == pytest.approx(2 / 3 + 1 / 3 + 2 / 3 + 1 / 3)  # … then a once of twice (the other ended)
    assert tree.probs == sorted(tree.probs, reverse=True)  # added best first
    assert len(speculate(match, 2, 0.1, SEP).tokens) == 2 and not speculate(match, 8, 0.9, SEP).tokens


def test_the_request_itself_is_matched_but_not_its_own_end():
    match = scan_match([5, 6, 7, 8, 5, 6], [5, 6, 7, 8, 5, 6], "request")
    assert match.length == 2 and match.starts.tolist() == [2]  # '5 6' was followed by 7; the end itself not
    assert scan_match([1, 2, 3], [1, 2, 3], "request") is None


def test_the_priced_cut_maximises_expected_tokens_per_cost():
    from explorer.methods.suffix.corpus import Speculation

    spec = Speculation(None, [1, 2, 3, 4], [-1, 0, 1, 2], [0.9, 0.8, 0.2, 0.1], [9, 8, 2, 1])
    free = priced(spec, [1.0, 1.0, 1.0, 1.0, 1.0])
    assert len(free.tokens) == 4  # verification free: every node
    dear = priced(spec, [1.0, 1.3, 1.6, 2.5, 3.0])
    assert dear.tokens == [1, 2]  # (1 + 0.9 + 0.8) / 1.6 = 1.69 beats 1.52, 1.30 and 1.0
    assert priced(spec, [1.0, 2.0, 3.0, 4.0, 5.0]).tokens == []


@pytest.mark.parametrize("corpus", ["all", "request", "history"])
def test_greedy_suffix_equals_ar_on_a_tiny_model(corpus):
    target = explorer.load("tiny-random:51")
    prompt = "the cat sat on the mat. the cat sat on the mat. the"
    ar = explorer.decode(target, prompt, method="ar", max_new_tokens=30)
    priced = explorer.decode(target, prompt, method="suffix", suffix_corpus=corpus, max_new_tokens=30,
                             session=f"tiny-priced-{corpus}")
    assert priced.output_ids == ar.output_ids  # its trees' sizes follow this machine's measured T(n)
    for _ in range(2):  # the second run also matches the first one's output (history)
        run = explorer.decode(target, prompt, method="suffix", suffix_corpus=corpus, suffix_size="paper",
                              max_new_tokens=30, session=f"tiny-{corpus}")
        assert run.output_ids == ar.output_ids
    assert run.summary.drafted > 0 and run.summary.tokens_per_target_forward > 1


def test_a_sessions_outputs_are_drafted_for_that_session_only():
    target = explorer.load("tiny-random:52")
    prompt = "abc abd abe."
    first = explorer.decode(target, prompt, method="suffix", suffix_corpus="history", suffix_size="paper",
                            max_new_tokens=20, session="ann")
    again = explorer.decode(target, prompt, method="suffix", suffix_corpus="history", suffix_size="paper",
                            max_new_tokens=20, session="ann")
    other = explorer.decode(target, prompt, method="suffix", suffix_corpus="history", suffix_size="paper",
                            max_new_tokens=20, session="bob")
    assert first.output_ids == again.output_ids == other.output_ids
    assert again.summary.accepted > 0  # ann's first output is drafted back to her
    assert first.summary.drafted == 0 and other.summary.drafted == 0  # but never to bob


@pytest.mark.parametrize("cfg", [SamplingConfig(1.0), SamplingConfig(0.8, top_k=8)])
def test_sampled_suffix_tokens_follow_the_target(tiny_target, cfg):
    """A history whose continuations after the prompt are varied: drafts are accepted and refused, and the
    first two tokens still follow the target's exact distribution."""
    session = f"chi-{cfg.temperature}-{cfg.top_k}"
    fp = fingerprint(tiny_target.model)
    p0, p1 = exact_two_token_distribution(tiny_target, cfg)
    likely = np.argsort(p0)[-3:]  # the target's three likeliest first tokens: drafts accepted often, not always
    rng = np.random.default_rng(1)
    for _ in range(20):
        HISTORY.add(fp, session, PREFIX + [int(rng.choice(likely))] + rng.integers(0, 32, 2).tolist())
    counts, accepted = np.zeros((2, p0.shape[0])), 0
    for seed in range(RUNS):
        t = explorer.decode(tiny_target, prompt_ids=PREFIX, method="suffix", suffix_corpus="history",
                            suffix_size="paper", max_new_tokens=2, temperature=cfg.temperature, top_k=cfg.top_k,
                            seed=seed, session=session)
        counts[0, t.output_ids[0]] += 1
        counts[1, t.output_ids[1]] += 1
        accepted += t.summary.accepted
    assert 0.2 < accepted / RUNS < 1.5  # drafts accepted on many runs, not all
    assert chi_square_pvalue(counts[0], p0) > 1e-3 and chi_square_pvalue(counts[1], p1) > 1e-3


def test_the_bench_and_race_grammar_and_bad_options():
    assert parse_system("suffix") == {"method": "suffix"}
    assert parse_system("suffix:request:4") == {"method": "suffix", "suffix_corpus": "request", "suffix_max_tokens": 4}
    with pytest.raises(explorer.ExplorerError, match="suffix"):
        parse_system("suffix:everything")
    with pytest.raises(explorer.ExplorerError, match="suffix_max_tokens"):
        explorer.decode("tiny-random", "hi", method="suffix", suffix_max_tokens=0)


def test_a_traces_details_are_checked_and_its_text_shown_as_text():
    trace = explorer.decode("tiny-random", "the cat sat on the mat. the cat sat on the", method="suffix",
                            suffix_size="paper", max_new_tokens=16, session="text")
    data = json.loads(trace.to_json())
    drafted = next(i for i, r in enumerate(trace.rounds) if r.tree and r.tree["nodes"])
    token = trace.rounds[drafted].tree["nodes"][0]["token"]
    data["token_text"][str(token)] = "<img src=x onerror=alert(1)>"
    shown = explorer.load_trace(json.dumps(data))
    page = tree_html(shown, drafted)
    assert "<img" not in page and "&lt;img" in page and "occur" in page
    assert rounds_figure(shown, drafted).layout.title.text.startswith("SuffixDecoding")
    data["rounds"][drafted]["detail"]["matched"] = list(range(100))  # longer than any match
    with pytest.raises(explorer.ExplorerError, match="matched"):
        explorer.load_trace(json.dumps(data))


def test_greedy_suffix_equals_ar_on_the_default_model(default_model):
    """The shipped answers, the prompt and this session's earlier output, on prompts no answer was shipped for."""
    prompt = "Write a Python function that checks whether a number is prime."
    ar = explorer.decode(default_model, prompt, method="ar", max_new_tokens=48)
    for _ in range(2):
        run = explorer.decode(default_model, prompt, method="suffix", max_new_tokens=48, session="default-model")
        assert run.output_ids == ar.output_ids
    assert run.summary.tokens_per_target_forward > 2  # the second run matches the first's output
    assert "shipped answers" in run.draft_about


def test_the_history_is_bounded_per_session_and_in_sessions():
    from explorer.methods.suffix.corpus import History

    history = History()
    for i in range(30):
        history.add("fp", "ann", list(range(3000)))
    assert len(history.corpus("fp", "ann", -1)) <= History.MAX_TOKENS + 30
    for i in range(History.MAX_SESSIONS + 5):
        history.add("fp", f"visitor-{i}", [1, 2, 3])
    assert len(history.corpus("fp", "ann", -1)) == 0  # the oldest session went first
    assert history.corpus("fp", f"visitor-{History.MAX_SESSIONS + 4}", -1).tolist() == [1, 2, 3, -1]


def test_api_callers_give_way_before_the_pages_visitors():
    """Issue 40, item 5: every anonymous API call (a fresh client, a /call request) is a session of its own, so 64
    one-token calls evicted every visitor's outputs. Sessions named ``api:…`` go first; visitors evict each other
    only when no API session is left."""
    from explorer.methods.suffix.corpus import History

    history = History()
    history.add("fp", "visitor", [7, 8, 9])
    for i in range(3 * History.MAX_SESSIONS):
        history.add("fp", f"{History.API_PREFIX}{i}", [1])
    assert history.corpus("fp", "visitor", -1).tolist() == [7, 8, 9, -1]  # kept through 192 API sessions
    newest = f"{History.API_PREFIX}{3 * History.MAX_SESSIONS - 1}"
    assert history.corpus("fp", newest, -1).tolist() == [1, -1]  # the newest API caller keeps its own
    for i in range(History.MAX_SESSIONS):
        history.add("fp", f"visitor-{i}", [5])
    assert len(history.corpus("fp", "visitor", -1)) == 0  # visitors among themselves: the oldest goes first
    assert all(not owner.startswith(History.API_PREFIX) for _, owner in history._outputs)


def test_a_caller_that_cannot_be_told_apart_keeps_and_drafts_nothing():
    """Issue 40, item 1: ``session=None`` (an MCP call, a call without a session) neither joins a history nor
    drafts from one, and the run says so."""
    target = explorer.load("tiny-random:52")
    prompt = "abc abd abe."
    before = {key: len(kept) for key, kept in HISTORY._outputs.items()}
    runs = [explorer.decode(target, prompt, method="suffix", suffix_corpus="history", suffix_size="paper",
                            max_new_tokens=20, session=None) for _ in range(2)]
    assert runs[0].output_ids == runs[1].output_ids and runs[1].summary.drafted == 0
    assert {key: len(kept) for key, kept in HISTORY._outputs.items()} == before
    assert "no earlier outputs" in runs[1].draft_about


def test_where_a_match_was_found_is_said_in_words():
    """#48: the view said "the greedy answer to bank prompt list-07"."""
    from explorer.viz.views.suffix import where_found
    assert where_found("the greedy answer to bank prompt list-07") == (
        "the target's own greedy answer to one of the shipped training prompts: list prompt no. 8")
    assert "bank" not in where_found("the sampled answer to bank prompt chat-00")
    assert where_found("an earlier run") == "an earlier run"
