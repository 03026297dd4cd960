"""CUDA graphs' arithmetic, checked on the CPU (``engine.cuda_graphs``): the static-buffer stack a graph records
— whole-buffer attention under a position mask, keys written at their positions, the buffer doubled when a
context outgrows it — computes what the eager path computes, and every lossless method decodes through it
exactly as plain decoding does. The capture and replay themselves need a GPU: ``tools/gpu_check.py`` runs
these same comparisons there (docs/measurements.md, "GPU")."""

import contextlib

import pytest
import torch

import explorer
from explorer.engine import cuda_graphs, split_products
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
    assert cuda_graphs.COUNTS["static"] == before + 5  # the prompt (38 rows ≤ MAX_ROWS) and the other 4 forwards
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
    """Greedy through the static stack (the prompt eager, into the same buffers) equals plain decoding through
    it, and plain decoding through it equals the eager path. Lookahead's and BiTA's every forward is a tree
    (their own masks and positions): those run it with their mask as one more input."""
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
    assert cuda_graphs.COUNTS["static"] > before  # its forwards (verifications, trees, steps) ran it
    assert static_ar == eager_ar
    assert got == static_ar


@pytest.mark.parametrize("splits", [2, 4, 16, split_products.ROWS])
def test_a_split_product_is_the_product(splits):
    """``engine.split_products``: the inputs in chunks, summed after, give x Wᵀ + b (float32 rounding apart)."""
    torch.manual_seed(0)
    x, weight, bias = torch.randn(7, 576), torch.randn(1536, 576), torch.randn(1536)
    exact = torch.nn.functional.linear(x.double(), weight.double(), bias.double())
    got = split_products.split_product(x, weight, bias, splits)
    assert got.shape == (7, 1536)
    assert float((got.double() - exact).abs().max()) < 1e-3
    assert not torch.equal(split_products.split_product(x, weight, None, splits), torch.zeros(7, 1536))


@pytest.mark.parametrize("splits", [4, split_products.ROWS])
@pytest.mark.parametrize("method", ["speculative", "bita"])
def test_split_products_decode_as_plain_decoding_does(tiny_target, monkeypatch, method, splits):
    """Every few-row product of the static stack split in 4 chunks, or run row by row (what a card may choose):
    greedy output is still plain decoding's, and the choice ran (forced; on a GPU the choice is measured)."""
    settings = dict(max_new_tokens=16, temperature=0.0, draft="prompt-lookup:2" if method == "speculative" else None)
    plain = explorer.decode(tiny_target, PROMPT, method="ar", max_new_tokens=16, temperature=0.0).output_ids
    calls = []
    original = split_products.split_product
    monkeypatch.setattr(split_products, "split_product", lambda *a: calls.append(a[-1]) or original(*a))
    monkeypatch.setattr(split_products, "FORCED", splits)
    with cuda_graphs.static_on_cpu():
        got = explorer.decode(tiny_target, PROMPT, method=method, **settings).output_ids
    assert splits in calls
    assert got == plain


def test_joined_products_follow_a_weight_changed_in_place_and_graphs_of_the_old_copies_are_not_replayed(tiny_target):
    from explorer.engine import static_stack

    layer = tiny_target.model.model.layers[0]
    q = layer.self_attn.q_proj.weight
    # what a capture times the splits of (``cuda_graphs._replay`` → ``split_products.choose``): the joined products
    qkv, o, gate_up, down = static_stack.products(layer)
    assert qkv is static_stack.joined(layer).qkv and gate_up is static_stack.joined(layer).gate_up
    assert (o, down) == (layer.self_attn.o_proj, layer.mlp.down_proj)
    before, generation = static_stack.joined(layer), static_stack.generation()
    assert static_stack.joined(layer) is before  # made once per layer
    assert torch.equal(before.qkv.dense[:q.shape[0]], q) and before.gate_up.dense.shape[0] == 2 * before.inner
    try:
        with torch.no_grad():
            q.mul_(2)
        after = static_stack.joined(layer)
        assert after is not before and torch.equal(after.qkv.dense[:q.shape[0]], q)
        assert static_stack.generation() == generation + 1  # in every graph's key (``cuda_graphs._replay``)
    finally:
        with torch.no_grad():
            q.div_(2)
    assert torch.equal(static_stack.joined(layer).qkv.dense[:q.shape[0]], q)
