"""A linear layer on this machine's matrix kernels: the product ``engine.kernels`` chose for each row
bucket (MKL's, or oneDNN's over the weight packed in its blocked layout), the same function as the
``nn.Linear`` it was made from, which it does not change. Made by the fast view (``engine.fast``).

Shape legend: R rows (tokens), I input features, O output features.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from . import kernels, layer_maths
from .products import LayerProduct


class KernelLinear(torch.nn.Module, LayerProduct):
    """``y = x Wᵀ + b`` through the kernel ``kinds`` names for each row bucket (``engine.kernels``); the
    same function as the ``nn.Linear`` (or the weight) it was made from, which it does not change.
    Inference only (oneDNN's packed op has no gradient). A compiled layer reads its ``forms``."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None, kinds=("onednn-8",) * 3,
                 owned: bool = False):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.dtype = weight.dtype
        # plain attributes, not parameters or buffers: state_dict, .to() and parameter counts never see them
        # (a packed weight is opaque: it cannot be copied or moved)
        self.dense = weight.detach()
        self.owned = owned  # the dense weight is a copy made for this view (a fused one), not the model's
        self.bias_tensor = None if bias is None else bias.detach()
        self.forms: dict[str, torch.Tensor] = {}
        self.keep(tuple(kinds) if len(kinds) == len(kernels.BUCKETS) else (kinds[0],) * len(kernels.BUCKETS),
                  also=kinds)

    def keep(self, kinds: tuple[str, ...], also=()) -> None:
        """Run ``kinds`` (one per row bucket) from now on, and hold the weight in the forms they (and
        ``also``, for a measurement) need; drop the others."""
        wanted = set(kinds) | set(also)
        with torch.no_grad():
            for kind in wanted - set(self.forms):
                self.forms[kind] = self.dense if kind == "mkl" else \
                    torch.ops.mkldnn._reorder_linear_weight(self.dense.contiguous(), kernels.PACKED_ROWS[kind])
        for kind in set(self.forms) - wanted:
            del self.forms[kind]
        if self.owned and "mkl" not in wanted:
            self.dense = self.dense.new_empty(0, self.in_features)  # a fused copy no kernel reads: its memory goes
        self.kinds = tuple(kinds)
        self._by_bucket = tuple(self._kernel(kind) for kind in kinds)

    def _kernel(self, kind: str):
        """(R, I) -> (R, O) through ``kind``, as one call."""
        form, bias = self.forms[kind], self.bias_tensor
        if kind == "mkl":
            return functools.partial(F.linear, weight=form, bias=bias)
        pointwise = torch.ops.mkldnn._linear_pointwise.default
        return lambda x: pointwise(x, form, bias, "none", [], "")

    def compiled_form(self, kind: str) -> tuple[str, tuple[torch.Tensor]] | None:
        """(family, tensors) of ``kind``'s kernel as the compiled layer takes them (``engine.compiled``),
        None where this linear does not hold ``kind``'s form."""
        return (layer_maths.FAMILY[kind], (self.forms[kind],)) if kind in self.forms else None

    def run(self, kind: str, flat: torch.Tensor) -> torch.Tensor:
        """(R, I) -> (R, O) through ``kind`` (the kernel measurement's call)."""
        return self._kernel(kind)(flat)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features)  # (R, I)
        if not flat.is_contiguous():
            flat = flat.contiguous()
        rows = flat.shape[0]
        out = self._by_bucket[kernels.bucket(rows)](flat)  # (R, O)
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_bytes(self) -> int:
        """Memory this view added: the packed forms, and the dense weight where it is a copy."""
        packed = sum(f.numel() * f.element_size() for k, f in self.forms.items() if k != "mkl")
        return packed + (self.dense.numel() * self.dense.element_size() if self.owned else 0)

    @property
    def note(self) -> str:
        """The kernel of each row bucket, in words."""
        return "kernels by rows: " + ", ".join(f"{rows}: {kind}" for rows, kind in zip(kernels.BUCKETS, self.kinds))

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, kernels={'/'.join(self.kinds)}"
