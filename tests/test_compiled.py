"""The compiled decoder layer (``engine.compiled``): built once per machine in a child process, loaded and
checked in each process, the same function as the eager layer for every row count, used by every decode
path, and never in the way: without a compiler, past its time limit or switched off, decoding runs the
eager fast path and says why. Tiny models need ``EXPLORER_COMPILE=1`` (by default only layers big enough
to pay for the compiler's runtime are compiled); the real model's are compiled by default, and every
lossless test on it runs compiled."""

import time

import pytest
import torch

import explorer
from explorer.engine import compiled, fast, kernels, layer_maths
from explorer.engine.cache import CachedForward
from explorer.engine import fused_layer
from explorer.engine.fast import fast_view
from explorer.engine.fused_layer import FusedLlamaLayer
from explorer.engine.forward import full_forward

pytestmark = pytest.mark.skipif(kernels.available(torch.float32) != kernels.KINDS,
                                reason="this torch has no oneDNN linear")

IDS = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5]


@pytest.fixture
def compiling(monkeypatch):
    monkeypatch.setenv("EXPLORER_COMPILE", "1")
    monkeypatch.setenv("EXPLORER_KERNELS", "mkl")  # one graph family: one compile on a fresh machine


def test_tiny_layers_are_left_eager_by_default(monkeypatch):
    monkeypatch.delenv("EXPLORER_COMPILE", raising=False)
    view = fast_view(explorer.load("tiny-random:31").model)
    assert not any(view.model.layers[0].compiled_buckets)


@pytest.mark.parametrize("kind", ["mkl", "onednn-8"])
def test_compiled_logits_equal_the_eager_ones_for_every_row_count(monkeypatch, kind):
    """One token, a verification, a tree-sized forward, each after a cached context; then the caches hold
    the same keys and values."""
    monkeypatch.setenv("EXPLORER_COMPILE", "1")
    monkeypatch.setenv("EXPLORER_KERNELS", kind)
    model = explorer.load("tiny-random:32").model
    view = fast_view(model)
    assert all(all(layer.compiled_buckets) for layer in view.model.layers), compiled.status()
    runs = {}
    for mode in ("compiled", "eager"):
        runner = CachedForward(full_forward(model), torch.device("cpu"))
        with compiled.eager() if mode == "eager" else _nothing():
            out = [runner.logits(IDS[:8], 1)]
            for n in (1, 4, 12):
                out.append(runner.logits(IDS[: 8 + n + sum(range(n))], n))  # the context grows, the cache follows
            runner.truncate(10)  # a rollback, then a forward over the cut cache
            out.append(runner.logits(IDS[:14], 4))
        runs[mode] = (out, [layer.keys[:, :, :14].clone() for layer in runner.cache.layers])
    for a, b in zip(runs["compiled"][0], runs["eager"][0]):
        assert (a - b).abs().max() < 1e-5
    for a, b in zip(runs["compiled"][1], runs["eager"][1]):
        assert (a - b).abs().max() < 1e-5


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("method, draft", [("ar", None), ("speculative", "prompt-lookup:2"),
                                           ("speculative", "early-exit:1"), ("bita", None)])
def test_every_decode_path_runs_compiled_and_decodes_the_same_tokens(compiling, monkeypatch, method, draft):
    """Plain decoding, a verification, the early exit's split cache, BiTA's tree mask: every layer call goes
    through a compiled step (counted), and the greedy output equals the eager fast path's."""
    target = explorer.load("tiny-random:33")
    fast_view(target.model)
    calls = []
    real = fused_layer._run_step
    monkeypatch.setattr(fused_layer, "_run_step", lambda *a: calls.append(1) or real(*a))
    prompt = "the cat sat on the mat. the cat sat on the"
    kwargs = {"method": method, "max_new_tokens": 16} | ({"draft": draft} if draft else {})
    ours = explorer.decode(target, prompt, **kwargs)
    assert calls, "no layer ran compiled"
    with compiled.eager():
        eager = explorer.decode(target, prompt, **kwargs)
    assert ours.output_ids == eager.output_ids


def test_a_compiled_layer_is_only_used_where_it_fits(compiling):
    """Batch rows (the trainers' batched generation) and a cache that is not the engine's run eagerly."""
    from transformers import DynamicCache

    model = explorer.load("tiny-random:34").model
    layer = fast_view(model).model.layers[0]
    assert isinstance(layer, FusedLlamaLayer) and layer.compiled_buckets[0]
    base = model.model
    h = torch.randn(2, 3, base.config.hidden_size)
    rotary = base.rotary_emb(h, position_ids=torch.arange(3)[None].expand(2, 3))
    with torch.inference_mode():
        out = layer(h, attention_mask=None, position_embeddings=rotary, past_key_values=DynamicCache(), use_cache=True)
        ref = base.layers[0](h, attention_mask=None, position_embeddings=rotary, past_key_values=DynamicCache(),
                             use_cache=True)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-4)


def test_without_a_compiler_decoding_runs_eagerly_and_says_why(compiling, monkeypatch, tmp_path):
    """No C++ compiler (CXX names none): the child's compile fails, the layer stays eager, the status says
    so in one line, the failure is remembered (no second attempt per process start), decoding works. Two
    kernel families (MKL for one row, oneDNN for more) are two forms, built side by side (``build_missing``)."""
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "explorer"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # nothing compiled to reuse
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("EXPLORER_KERNELS", "1=mkl,2-8=onednn-8,9-64=onednn-8")
    monkeypatch.setattr(compiled, "_STEPS", {})
    monkeypatch.setattr(compiled, "_STATUS", {})
    spans, build = [], compiled._build_in_child

    def timed_build(shape, path):
        start = time.perf_counter()
        try:
            build(shape, path)
        finally:
            spans.append((start, time.perf_counter()))

    monkeypatch.setattr(compiled, "_build_in_child", timed_build)
    target = explorer.load("tiny-random:35")
    trace = explorer.decode(target, "hello there", max_new_tokens=6)
    assert len(trace.output_ids) == 6
    assert not any(fast_view(target.model).model.layers[0].compiled_buckets)
    states = compiled.status()
    assert len(states) == 2 and all(s.startswith("eager:") and "\n" not in s for s in states.values()), states
    assert len(list((tmp_path / "explorer" / "compiled").glob("*.failed"))) == 2
    (a, b), (c, d) = spans
    assert max(a, c) < min(b, d), "the two forms were built one after the other"
    monkeypatch.setattr(compiled, "_STEPS", {})
    monkeypatch.setattr(compiled, "_STATUS", {})
    explorer.decode(explorer.load("tiny-random:35"), "hello", max_new_tokens=2)
    assert len(spans) == 2, "a remembered failure is not tried again"
    assert all("failed before on this machine" in s and "delete" in s for s in compiled.status().values())


def test_a_compile_past_its_time_limit_leaves_the_eager_path(compiling, monkeypatch, tmp_path):
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path))
    monkeypatch.setattr(compiled, "COMPILE_TIMEOUT_S", 0.5)
    monkeypatch.setattr(compiled, "_STEPS", {})
    monkeypatch.setattr(compiled, "_STATUS", {})
    target = explorer.load("tiny-random:36")
    assert len(explorer.decode(target, "hi", max_new_tokens=3).output_ids) == 3
    (state,) = compiled.status().values()
    assert "took over 0.5 s" in state


def test_switched_off_nothing_is_compiled(monkeypatch):
    monkeypatch.setenv("EXPLORER_COMPILE", "0")
    view = fast_view(explorer.load("tiny-random:37").model)
    assert not any(view.model.layers[0].compiled_buckets)


def test_the_real_models_layers_run_compiled_and_equal_its_own_forward(default_model):
    """By default the default model's layers are compiled (3.5 M weights a layer); logits for one and six
    new tokens equal the model's own forward (the fast-path test's tolerance) and the eager fast path's."""
    model, device = default_model.model, default_model.device
    view = fast_view(model)
    if not any(view.model.layers[0].compiled_buckets):
        pytest.skip(f"no compiled layer on this machine: {compiled.status()}")
    ids = default_model.encode("Explain why verification is cheap on a GPU.")
    runner = CachedForward(full_forward(model), device)
    runner.logits(ids[:-6], 1)
    for n in (1, 6):
        runner.truncate(len(ids) - n)
        ours = runner.logits(ids, n)
        with torch.inference_mode():
            ref = model(input_ids=torch.tensor([ids])).logits[0, -n:]
        assert (ours - ref).abs().max() < 5e-4 and torch.equal(ours.argmax(-1), ref.argmax(-1))


@pytest.mark.parametrize("rows, past", [(1, 0), (1, 37), (3, 20)])
def test_attention_by_fused_reductions_equals_attention_by_products(rows, past):
    """A low-bit copy's one-row steps attend by reductions (``attention_rows``): the same function as the
    batched products, over a slice of a cache buffer with room to spare, the causal mask included."""
    generator = torch.Generator().manual_seed(rows + past)
    q = torch.randn(9, rows, 64, generator=generator)
    buffer = torch.randn(2, 3, 64 + past + rows, 64, generator=generator)  # (K/V, G, C, D)
    k, v = buffer[0, :, :past + rows], buffer[1, :, :past + rows]
    mask = torch.full((rows, past + rows), torch.finfo(torch.float32).min).triu(past + 1)
    expected = layer_maths.attention(q, k, v, mask, 0.125)
    assert torch.allclose(layer_maths.attention_rows(q, k, v, mask, 0.125), expected, atol=1e-5)


def test_the_artifacts_key_follows_the_code_that_compiles_and_nothing_else(tmp_path, monkeypatch):
    """An edit to the compile policy and cache (compiled.py) keeps every compiled artifact (a new key costs a
    compile of 10–30 s per layer shape and family on 2 cores); an edit to the layer's maths or to what the
    child traces and compiles makes a new one. Each module is pointed at an edited copy of its file."""
    from pathlib import Path

    from explorer.engine import compile_child

    key = compiled.source_key()

    def key_with_an_edit_to(module) -> str:
        with monkeypatch.context() as patch:
            copy = tmp_path / Path(module.__file__).name
            copy.write_text(Path(module.__file__).read_text() + "\n# an edit that changes nothing it computes\n")
            patch.setattr(module, "__file__", str(copy))
            return compiled.source_key()

    assert key_with_an_edit_to(compiled) == key
    assert key_with_an_edit_to(layer_maths) != key
    assert key_with_an_edit_to(compile_child) != key
    assert compiled.source_key() == key
