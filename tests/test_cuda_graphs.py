"""CUDA graphs' arithmetic, checked on the CPU (``engine.cuda_graphs``): the static-buffer stack a graph records
— whole-buffer attention under a position mask, keys written at their positions, the buffer doubled when a
context outgrows it — computes what the eager path computes, and every lossless method decodes through it
exactly as plain decoding does. The capture and replay themselves need a GPU: ``tools/gpu_check.py`` runs
these same comparisons there (docs/measurements.md, "GPU")."""

import contextlib

import pytest
import torch

import explorer
from explorer.engine import cuda_graphs
from explorer.engine.cache import CachedForward
from explorer.engine.forward import full_forward

PROMPT = "the cat sat on the mat. the cat sat on"


def _logits(model, steps, static):
    """Logits of a growing sequence, forward by forward (a prompt, then 1, 3 and 2 new rows, a rollback, 4)."""
    runner = CachedForward(full_forward(model.model), model.device)
    ids = model.tokenizer.encode(PROMPT)
    out = []
    with cuda_graphs.static_on_cpu() if static else contextlib.nullcontext():
        for sequence, n in steps(ids):
            out.append(runner.logits(sequence, n))
    return out


def _steps(ids):
    yield ids, 1
    yield ids + [3], 1
    yield ids + [3, 4, 5, 6], 3
    yield ids + [3, 4, 7], 2  # a rejection: the cache cut back to ids + [3, 4], the stale keys masked
    yield ids + [3, 4, 7, 8, 9, 10, 11], 4


@pytest.mark.parametrize("fast_path", ["1", "0"])  # fused layers (the fast view) and the model's own layers
def test_the_static_stack_computes_the_eager_forward(tiny_target, monkeypatch, fast_path):
    monkeypatch.setenv("EXPLORER_FAST_PATH", fast_path)
    eager = _logits(tiny_target, _steps, False)
    before = cuda_graphs.COUNTS["static"]
    static = _logits(tiny_target, _steps, True)
    assert cuda_graphs.COUNTS["static"] == before + 4  # the prompt (38 rows) eagerly, the other 4 forwards through it
    for a, b in zip(eager, static):
        assert a.shape == b.shape
        assert float((a - b).abs().max()) < 1e-4


def test_a_context_longer_than_the_buffer_doubles_it(tiny_target, monkeypatch):
    monkeypatch.setattr(cuda_graphs, "CAPACITY", 16)
    ids = tiny_target.tokenizer.encode(PROMPT)  # 38 positions: the first static forward makes a 64-slot buffer

    def growing(ids):
        for n in range(1, 40, 3):  # up to 77 positions, past 64: the buffer doubles to 128 on the way
            yield ids + [5] * n, 1

    eager, static = _logits(tiny_target, growing, False), _logits(tiny_target, growing, True)
    for a, b in zip(eager, static):
        assert float((a - b).abs().max()) < 1e-4


def _first_buffer(runner) -> int:
    return runner.cache.layers[0]._key_buffer.data_ptr()


def test_a_finished_decodes_buffers_serve_the_next_and_two_at_once_never_share(tiny_target):
    """The graphs of a decode replay for the next (their buffers' addresses are baked in, #52): a cache that is
    gone gives its buffers back, zeroed before reuse, and the next decode computes the same logits on them; two
    caches alive at once never share a buffer."""
    ids = tiny_target.tokenizer.encode(PROMPT)
    with cuda_graphs.static_on_cpu():
        first = CachedForward(full_forward(tiny_target.model), tiny_target.device)
        first.logits(ids, 1)
        before = first.logits(ids + [3, 4, 5], 3)
        address = _first_buffer(first)
        other = CachedForward(full_forward(tiny_target.model), tiny_target.device)
        other.logits(ids, 1)
        other.logits(ids + [3], 1)
        assert _first_buffer(other) != address  # both alive: each its own
        del first
        again = CachedForward(full_forward(tiny_target.model), tiny_target.device)
        again.logits(ids, 1)
        after = again.logits(ids + [3, 4, 5], 3)
        assert _first_buffer(again) == address  # the finished decode's, given back
        assert torch.equal(before, after)


def test_off_means_nothing_runs_here(tiny_target, monkeypatch):
    monkeypatch.setenv("EXPLORER_CUDA_GRAPHS", "0")
    hidden = torch.zeros(1, 1, 32)
    with cuda_graphs.static_on_cpu():
        assert cuda_graphs.run([], hidden, 0, None, None) is None
    monkeypatch.delenv("EXPLORER_CUDA_GRAPHS")
    assert cuda_graphs.run(list(tiny_target.model.model.layers), hidden, 0, None, None) is None  # no CUDA, no block


@pytest.mark.parametrize("method,draft", [
    ("speculative", "prompt-lookup:2"), ("speculative", "model:tiny-random:2:1"), ("quantized", "int4"),
    ("speculative", "early-exit:1"), ("suffix", None), ("lookahead", None), ("bita", None), ("hierarchical", None),
])
def test_every_lossless_method_decodes_through_it_as_plain_decoding_does(tiny_target, method, draft):
    """Greedy through the static stack (trees and the prompt eager, into the same buffers) equals plain
    decoding through it, and plain decoding through it equals the eager path. Lookahead's and BiTA's every
    forward is a tree (their own masks and positions): they run eagerly, beside graphed neighbours."""
    settings = dict(max_new_tokens=24, temperature=0.0)
    if draft:
        settings["draft"] = draft
    if method == "hierarchical":
        settings["draft"] = "prompt-lookup:2>model:tiny-random:2:1"
    eager_ar = explorer.decode(tiny_target, PROMPT, method="ar", **settings | {"draft": None}).output_ids
    with cuda_graphs.static_on_cpu():
        static_ar = explorer.decode(tiny_target, PROMPT, method="ar", **settings | {"draft": None}).output_ids
        before = cuda_graphs.COUNTS["static"]
        got = explorer.decode(tiny_target, PROMPT, method=method, **settings).output_ids
    trees_only = method in ("lookahead", "bita")
    assert (cuda_graphs.COUNTS["static"] > before) != trees_only  # its linear forwards (verifications, steps) ran it
    assert static_ar == eager_ar
    assert got == static_ar
