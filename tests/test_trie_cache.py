"""The trie of KV caches beam search scores its rows through (``engine.trie_cache.TrieCache``): one forward a
call, whatever the rows share, and the same log-probabilities as each row decoded on its own cache; nodes off
every live row are dropped and what stays is still right; a failed forward leaves nothing half-added."""

import random

import pytest
import torch

import explorer
from explorer.engine import trie_cache
from explorer.engine.cache import CachedForward
from explorer.engine.forward import full_forward
from explorer.engine.trie_cache import TrieCache, rows_scorer


def alone(model, row: list[int], n: int) -> torch.Tensor:
    """Row decoded on a cache of its own: (n, V) log-probabilities after its last n positions."""
    return CachedForward(full_forward(model), torch.device("cpu")).logits(row, n).float().log_softmax(dim=-1)


def beams(rng: random.Random, prompt: list[int], calls: int, width: int, vocab: int):
    """Calls of ``width`` rows that grow from one another as a beam search's do: each call's rows extend rows
    of the call before by 1–3 tokens (some beams die, some branch), asking for 1–4 positions' log-probs."""
    rows = [list(prompt)]
    for _ in range(calls):
        rows = [rng.choice(rows) + [rng.randrange(vocab) for _ in range(rng.randint(1, 3))] for _ in range(width)]
        yield rows, [rng.randint(1, min(4, len(r))) for r in rows]


@pytest.mark.parametrize("slack", [0, trie_cache.SLACK])
def test_every_call_is_one_forward_and_gives_each_rows_own_log_probabilities(monkeypatch, slack):
    monkeypatch.setattr(trie_cache, "SLACK", slack)  # 0: the cache is compacted after nearly every call
    model = explorer.load("tiny-random:1").model
    vocab = model.get_output_embeddings().weight.shape[0]
    scorer, rng = TrieCache.of_model(model, torch.device("cpu")), random.Random(5)
    sizes = []
    for calls, (rows, ns) in enumerate(beams(rng, [rng.randrange(vocab) for _ in range(9)], 32, 3, vocab), 1):
        found = scorer.logprobs(rows, ns)
        assert scorer.forwards == calls  # every call adds a node: exactly one forward each
        for row, n, lp in zip(rows, ns, found):
            assert lp.shape == (n, vocab)
            torch.testing.assert_close(lp, alone(model, row, n), rtol=0, atol=1e-4)
        sizes.append(len(scorer.tokens))
        assert scorer.caches[0].get_seq_length() == len(scorer.tokens) == scorer.hidden.shape[0]
    whole = scorer.logprobs(rows, [len(r) for r in rows])  # every position, from nodes run calls ago
    assert scorer.forwards == calls
    for row, lp in zip(rows, whole):
        torch.testing.assert_close(lp, alone(model, row, len(row)), rtol=0, atol=1e-4)
    dropped = sum(b < a for a, b in zip(sizes, sizes[1:]))
    assert dropped >= 2 if slack == 0 else dropped == 0, str(sizes)  # compacted (and read again after) or never


def test_a_failed_forward_leaves_an_empty_trie_that_still_answers(monkeypatch):
    model = explorer.load("tiny-random:1").model
    scorer = TrieCache.of_model(model, torch.device("cpu"))
    scorer.logprobs([[5, 6, 7], [5, 6, 8]], [2, 2])

    def broken(*args, **kwargs):
        raise RuntimeError("a forward that fails halfway")

    monkeypatch.setattr(trie_cache, "run_layers", broken)
    with pytest.raises(RuntimeError):
        scorer.logprobs([[5, 6, 7, 9]], [1])
    assert scorer.tokens == [] and scorer.caches[0].get_seq_length() == 0
    monkeypatch.undo()
    torch.testing.assert_close(scorer.logprobs([[5, 6, 7, 9]], [3])[0], alone(model, [5, 6, 7, 9], 3), rtol=0, atol=1e-4)


def test_a_model_that_is_not_a_llama_style_decoder_gets_a_cache_per_row():
    from explorer.engine.kv_pool import KVPool

    assert isinstance(rows_scorer(explorer.load("tiny-random:1").model, torch.device("cpu"), 4), TrieCache)

    class Opaque(torch.nn.Module):  # a causal LM the engine cannot run layer by layer
        def get_output_embeddings(self):
            return torch.nn.Linear(2, 3)

    assert isinstance(rows_scorer(Opaque(), torch.device("cpu"), 4), KVPool)


def test_a_bfloat16_model_keeps_its_states_in_its_own_dtype():
    model = explorer.load("tiny-random:1", dtype="bfloat16").model
    scorer = TrieCache.of_model(model, torch.device("cpu"))
    rows = [[5, 6, 7, 9], [5, 6, 8]]
    for row, lp in zip(rows, scorer.logprobs(rows, [2, 2])):
        assert scorer.hidden.dtype == torch.bfloat16
        torch.testing.assert_close(lp, alone(model, row, 2), rtol=0, atol=0.05)


def draft_rows_agree(drafter, rows: list[list[int]]) -> None:
    """The draft's trie gives each row what its own runner gives it alone, all rows in one forward."""
    scorer = drafter.row_scorer()
    found = scorer.logprobs(rows, [1] * len(rows))
    assert scorer.forwards == 1
    for row, lp in zip(rows, found):
        drafter.runner.truncate(0)  # the whole row in one forward: a bf16 copy's one-token step rounds otherwise
        alone_q = drafter.runner.logits(row, 1).float().log_softmax(dim=-1)
        finite = torch.isfinite(alone_q)  # a draft that scores a shortlist: −inf elsewhere, in both
        assert torch.equal(finite, torch.isfinite(lp))
        torch.testing.assert_close(lp[finite], alone_q[finite], rtol=0, atol=1e-4)


def test_a_model_draft_an_untrained_early_exit_and_the_4_bit_copy_score_their_beams_in_one_forward(tiny_target):
    from explorer import methods
    from explorer.drafts import make_drafter

    methods.discover()  # the methods register their draft kinds (early-exit: EESD's)
    rows = [[5, 6, 7, 9], [5, 6, 8], [5, 6, 7, 10, 11]]
    for spec in ("model:tiny-random:2", "early-exit:1:untrained", "int4"):
        draft_rows_agree(make_drafter(spec, tiny_target, explorer.load), rows)


@pytest.mark.model
def test_the_default_models_trained_exit_scores_its_beams_in_one_forward(default_model):
    """early-exit:4 with its shipped exit layer: the target's first four layers, then the exit's own cache."""
    from explorer import methods
    from explorer.drafts import make_drafter

    methods.discover()
    prompt = default_model.encode("Write one sentence about the ocean.")
    drafter = make_drafter("early-exit:4", default_model, explorer.load)
    assert drafter.row_scorer().stages[1], "the shipped exit layer is a stage of its own"
    draft_rows_agree(drafter, [prompt + [504, 5065], prompt + [504, 1070], prompt + [330]])
