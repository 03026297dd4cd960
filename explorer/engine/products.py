"""What a product module (a matrix product y = x Wᵀ (+ b) standing in for an ``nn.Linear``) offers the code that
runs it, declared once: the fast view's ``KernelLinear`` (``engine.kernel_linear``: this machine's kernels), a
low-bit copy's ``LowBitLinear`` and its LM head ``ShortlistHead`` (``engine.lowbit``) each subclass the one they
keep (abstract base classes: the interface written in one place, and a class that leaves out one of its methods
cannot be made, a TypeError, instead of failing where a layer calls it).

Who reads what: the fused layer (``engine.fused_layer``) hands a layer's four products to the compiled layer in
the form each names (``compiled_form``) with its bias (``bias_tensor``) and runs its norms in the products'
``dtype``; memory reports add ``extra_bytes``; the page says in words how each runs (``note``).

Shape legend: I input features, O output features.
"""

from __future__ import annotations

import abc
from typing import Callable

import torch


class Product(abc.ABC):
    """A product module: called on (…, I), gives (…, O)."""

    note: str  # how it runs, in words for people ("torch's int4 kernel (2.1× a bfloat16 product here)")

    __call__: Callable[[torch.Tensor], torch.Tensor]  # an ``nn.Module``'s: ``forward``

    @abc.abstractmethod
    def extra_bytes(self) -> int:
        """Bytes it holds beyond the model's own weights (packed forms, codes and scales, copies)."""
        ...


class LayerProduct(Product):
    """A product inside a decoder layer, which the compiled layer (``engine.compiled``) may call in its place."""

    dtype: torch.dtype  # what it takes and gives (a layer's products share one)
    bias_tensor: torch.Tensor | None

    @abc.abstractmethod
    def compiled_form(self, kind: str) -> tuple[str, tuple[torch.Tensor, ...]] | None:
        """(family, tensors): how the compiled layer calls it (``layer_maths.product``) for row bucket kernel
        ``kind``; None where it holds no form for that kernel (the layer then runs eagerly)."""
        ...
