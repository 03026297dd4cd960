"""``load(spec)``: a spec string or a model object to a ``LoadedModel`` on a device and in a dtype (the specs
are listed in ``explorer.models``); each spec's source is its own module (``default``, ``hub``, ``tiny``)."""

from __future__ import annotations

import torch

from ..errors import ModelLoadError
from .default import _load_default
from .hub import load_hub
from .loaded import LoadedModel
from .quiet import quiet_transformers
from .tiny import _build_tiny_random

_DTYPES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
}


def resolve_device(device: str | torch.device | None) -> torch.device:
    """CUDA when present, else the CPU; an explicit choice must exist on this machine."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ModelLoadError(f"unknown device {device!r}: use 'cpu' or 'cuda'") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("device 'cuda' asked for, but this machine has no CUDA GPU: use 'cpu'")
    return dev


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """bf16 (or fp16 where bf16 is unsupported) on CUDA, fp32 on the CPU, unless chosen."""
    if dtype is None:
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return _DTYPES[str(dtype).lower()]
    except KeyError:
        raise ModelLoadError(f"unknown dtype {dtype!r}: use one of float32, bfloat16, float16") from None


def load(name, device: str | torch.device | None = None, dtype: str | torch.dtype | None = None,
         tokenizer=None) -> LoadedModel:
    """Load a model by spec (see ``explorer.models``) or wrap a ``transformers`` model object.

    A ``LoadedModel`` passed in is returned as it is.
    """
    if isinstance(name, LoadedModel):
        return name
    if isinstance(name, torch.nn.Module):
        return _wrap_object(name, tokenizer, device, dtype)
    if not isinstance(name, str):
        raise ModelLoadError(f"a model is a spec string ('default', 'hf:ORG/NAME' or 'tiny-random[:SEED]') or a "
                             f"model object, not {type(name).__name__}")
    if not name.strip():
        raise ModelLoadError("model name is empty: use 'default', 'hf:ORG/NAME' or 'tiny-random[:SEED]'")
    spec = name.strip()
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    # a checkpoint loads in float32 first and is cast after its fingerprint is taken: the trained drafts
    # shipped for a model are keyed by its float32 weights (``artifacts.fingerprint``), whatever it runs in
    weights = torch.float32 if not spec.startswith("tiny-random") else dt
    with quiet_transformers():
        if spec == "default":
            model, tok = _load_default(weights)
        elif spec.startswith("hf:"):
            model, tok = load_hub(spec[3:], weights)
        elif spec == "tiny-random" or spec.startswith("tiny-random:"):
            model, tok = _build_tiny_random(spec, dt)
        else:
            raise ModelLoadError(
                f"unknown model {spec!r}: use 'default', 'hf:ORG/NAME' (a Hugging Face causal LM) "
                "or 'tiny-random[:SEED[:LAYERS]]'"
            )
    if weights != dt:
        from ..artifacts import fingerprint

        model.explorer_fingerprint = fingerprint(model)
        model = model.to(dt)
    model = model.to(dev).eval().requires_grad_(False)
    return LoadedModel(spec, model, tok, dev, dt)


def _wrap_object(model: torch.nn.Module, tokenizer, device, dtype) -> LoadedModel:
    if not hasattr(model, "get_output_embeddings") or model.get_output_embeddings() is None:
        raise ModelLoadError(f"{type(model).__name__} is not a causal LM with an output head")
    param = next(model.parameters())
    if device is not None or dtype is not None:  # an explicit request: the caller wants it moved
        dev = resolve_device(device) if device is not None else param.device
        model = model.to(device=dev, dtype=resolve_dtype(dtype, dev) if dtype is not None else param.dtype)
        param = next(model.parameters())
    model.eval()
    name = getattr(model.config, "_name_or_path", "") or type(model).__name__
    return LoadedModel(name, model, tokenizer, param.device, param.dtype)
