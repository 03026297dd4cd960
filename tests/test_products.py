"""The product modules' declared interface (``engine.products``, #50): every class that stands in for an
``nn.Linear`` subclasses the abstract base it keeps and answers each of its members; a class that leaves one
out cannot be made; the fused layer takes layer products only; and whether a low-bit copy's layers run
compiled is read through the layer's public ``compiled_buckets``, not its private steps."""

import pytest
import torch

import explorer
from explorer.engine import lowbit
from explorer.engine.fused_layer import FusedLlamaLayer
from explorer.engine.kernel_linear import KernelLinear
from explorer.engine.products import LayerProduct, Product


def _weight() -> torch.Tensor:
    return torch.randn(64, 96, generator=torch.Generator().manual_seed(0)) * 96 ** -0.5


def test_every_product_class_declares_its_interface_and_answers_it():
    weight = _weight()
    x = torch.randn(3, 96, generator=torch.Generator().manual_seed(1))
    blocks = lowbit.Int4Blocks.rounded(weight)
    codes, scales = lowbit.int8_rows(weight)
    layer_products = {  # each with the weights it multiplies by
        "kernel": (KernelLinear(weight, kinds=("mkl",) * 3), weight),
        "int4": (lowbit.LowBitLinear.int4(blocks), blocks.dense()),
        "int8": (lowbit.LowBitLinear.int8(weight), codes.float() * scales[:, None])}
    for name, (product, dense) in layer_products.items():
        assert isinstance(product, LayerProduct), name
        family, tensors = product.compiled_form("mkl")
        assert family in ("mkl", *lowbit.FAMILIES) and all(isinstance(t, torch.Tensor) for t in tensors), name
        assert product.bias_tensor is None and product.dtype in (torch.float32, torch.bfloat16), name
        assert isinstance(product.note, str) and product.note, name
        assert product.extra_bytes() >= 0, name
        out = product(x.to(product.dtype)).float()
        assert out.shape == (3, 64) and float((out - x @ dense.T).abs().max()) < 0.05, name  # bf16: a few ulps
    head = lowbit.ShortlistHead(weight, k=4)
    assert isinstance(head, Product) and not isinstance(head, LayerProduct)  # a head is never a layer's product
    assert "top 4" in head.note and head.extra_bytes() > 0 and head(x).shape == (3, 64)
    assert KernelLinear(weight, kinds=("mkl",) * 3).compiled_form("onednn-8") is None  # no packed form held


def test_a_product_class_that_leaves_a_member_out_cannot_be_made():
    class NoCompiledForm(torch.nn.Module, LayerProduct):
        note = "a product without its compiled form"

        def extra_bytes(self) -> int:
            return 0

    with pytest.raises(TypeError, match="compiled_form"):
        NoCompiledForm()


def test_the_fused_layer_takes_layer_products_only(tiny_target):
    layer = tiny_target.model.model.layers[0]
    attn, mlp = layer.self_attn, layer.mlp
    with pytest.raises(TypeError, match="LayerProduct"):
        FusedLlamaLayer(layer, products=(attn.q_proj, attn.o_proj, mlp.gate_proj, mlp.down_proj))


def test_a_low_bit_copy_says_whether_its_layers_run_compiled(monkeypatch):
    """Switched off, no row bucket of any layer runs compiled, and the copy says its layers run eagerly."""
    from explorer.methods.quantized.lowbit_copy import lowbit_copy

    monkeypatch.setenv("EXPLORER_COMPILE", "0")
    copy = lowbit_copy(explorer.load("tiny-random:41"), "int4")
    assert all(not any(layer.compiled_buckets) for layer in copy.decoder.layers)
    assert len(copy.decoder.layers[0].compiled_buckets) == 3 and not copy.decoder.compiled()
    assert "layers eager" in copy.about()
