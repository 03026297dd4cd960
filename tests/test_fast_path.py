"""The CPU fast path (``engine.fast``): a view of the model with every linear packed for oneDNN and each
Llama layer's q/k/v and gate/up fused. It computes what the model computes, never changes the model,
and follows the model's weights if they change."""

import pytest
import torch

import explorer
from explorer.engine import fast
from explorer.engine.cache import CachedForward
from explorer.engine.fast import fast_view
from explorer.engine.fused_layer import FusedLlamaLayer
from explorer.engine.kernel_linear import KernelLinear
from explorer.engine.forward import fast_decoder, full_forward

pytestmark = pytest.mark.skipif(not fast.enabled(), reason="this torch has no oneDNN linear")


def stock_logits(model, ids, n):
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0, -n:]


def test_the_view_packs_and_fuses_and_shares_everything_else(default_model):
    model = default_model.model
    view = fast_view(model)
    assert view is not model and fast_view(model) is view  # made once per process
    assert all(isinstance(layer, FusedLlamaLayer) for layer in view.model.layers)
    assert isinstance(view.lm_head, KernelLinear)
    assert view.model.embed_tokens.weight is model.model.embed_tokens.weight  # shared, not copied
    assert view.model.norm.weight is model.model.norm.weight
    # the model itself is untouched: HF generate and the trainers still run the stock modules
    assert not any(isinstance(m, (KernelLinear, FusedLlamaLayer)) for m in model.modules())
    assert type(model.model.layers[0]).__name__ == "LlamaDecoderLayer" and type(model.lm_head) is torch.nn.Linear
    assert fast_decoder(model) is view.model


def test_fast_logits_equal_the_model_for_one_and_several_new_tokens(default_model):
    model, device = default_model.model, default_model.device
    ids = default_model.encode("Explain why verification is cheap on a GPU.")
    runner = CachedForward(full_forward(model), device)
    runner.logits(ids[:-6], 1)
    for n in (1, 6):  # a one-token step (GEMV-like) and a verification of several (GEMM)
        runner.truncate(len(ids) - n)
        ours = runner.logits(ids, n)
        ref = stock_logits(model, ids, n)
        assert (ours - ref).abs().max() < 5e-4
        assert torch.equal(ours.argmax(-1), ref.argmax(-1))


def test_fused_layer_equals_the_llama_layer_with_a_past_and_a_mask(tiny_target):
    """Two new tokens after three cached ones, with the explicit causal mask and without (SDPA path)."""
    from transformers import DynamicCache

    base = tiny_target.model.model
    layer, fused = base.layers[0], FusedLlamaLayer(base.layers[0])
    h = torch.randn(1, 5, base.config.hidden_size, generator=torch.Generator().manual_seed(0))
    pos = torch.arange(5)[None]
    rotary = base.rotary_emb(h, position_ids=pos)
    mask = torch.full((2, 5), torch.finfo(h.dtype).min).triu(4)[None, None]  # query i sees keys 0..3+i
    outs = []
    for module in (layer, fused):
        cache = DynamicCache()
        with torch.inference_mode():
            first = module(h[:, :3], attention_mask=None, position_ids=pos[:, :3], past_key_values=cache,
                           use_cache=True, position_embeddings=tuple(r[:, :3] for r in rotary))
            second = module(h[:, 3:], attention_mask=mask, position_ids=pos[:, 3:], past_key_values=cache,
                            use_cache=True, position_embeddings=tuple(r[:, 3:] for r in rotary))
        outs.append((first, second, cache.layers[0].keys.clone()))
    for a, b in zip(*outs):  # float rounding only: activations here are O(10), differences O(1e-5)
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-4)


def test_a_weight_changed_in_place_makes_a_new_view():
    model = explorer.load("tiny-random:5").model
    ids = [3, 1, 4, 1, 5]
    first = fast_view(model)
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.mul_(2.0)
    second = fast_view(model)
    assert second is not first
    runner = CachedForward(full_forward(model), torch.device("cpu"))
    assert (runner.logits(ids, 2) - stock_logits(model, ids, 2)).abs().max() < 1e-4


def test_the_switch_turns_it_off(monkeypatch):
    model = explorer.load("tiny-random:6").model
    monkeypatch.setenv("EXPLORER_FAST_PATH", "0")
    assert fast_view(model) is model
    monkeypatch.setenv("EXPLORER_FAST_PATH", "1")
    assert fast_view(model) is not model


def test_not_applied_where_it_does_not_fit():
    """fp16 weights (or CUDA) keep the module itself: the fast path serves float32 and bfloat16 on the CPU."""
    model = explorer.load("tiny-random:7", dtype="float16").model
    assert fast_view(model) is model


def test_bf16_gets_a_view_on_the_kernels_this_cpu_offers():
    """bf16 on the CPU: fused layers and the kernels this CPU runs for bf16 (oneDNN's packed bf16 needs
    AVX-512 or AVX-NE-CONVERT; without them MKL's product only), logits as the model's own bf16 forward's."""
    from explorer.engine import kernels

    target = explorer.load("tiny-random:7", dtype="bfloat16")
    view = fast_view(target.model)
    assert view is not target.model and isinstance(view.model.layers[0], FusedLlamaLayer)
    choice = fast.kernel_choice(target.model)
    assert set(choice.kinds) <= set(kernels.available(torch.bfloat16))
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    ours = CachedForward(full_forward(target.model), target.device).logits(ids, 3).float()
    ref = stock_logits(target.model, ids, 3).float()
    assert (ours - ref).abs().max() < 0.1 and torch.equal(ours.argmax(-1), ref.argmax(-1))


def test_a_view_goes_with_its_model():
    """Views are kept per model and process, but never keep a model alive (a server that drops a model
    from its cache gets the memory back, packed copies included)."""
    import gc
    import weakref

    model = explorer.load("tiny-random:9").model
    view = fast_view(model)
    model_ref, view_ref = weakref.ref(model), weakref.ref(view)
    del model, view
    gc.collect()
    assert model_ref() is None and view_ref() is None


def test_decoding_with_the_path_off_is_still_exact(default_model, monkeypatch):
    """``EXPLORER_FAST_PATH=0``: the model's own modules (and a plain matmul for a trained exit's
    restricted head) give the same greedy tokens as with the path on."""
    prompt = "List three uses of copper."
    on = explorer.decode(default_model, prompt, draft="early-exit:4", max_new_tokens=16)
    monkeypatch.setenv("EXPLORER_FAST_PATH", "0")
    off = explorer.decode(default_model, prompt, draft="early-exit:4", max_new_tokens=16)
    assert off.output_ids == on.output_ids and off.summary.accepted > 0
