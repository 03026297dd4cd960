"""The page's (and the API's) typed values as engine keywords: whole numbers where the engine counts,
finite numbers elsewhere, one readable line otherwise. Ranges are the engine's and the methods' to check."""

from __future__ import annotations

import math

import explorer
from explorer import machine
from explorer.limits import clip


def decode_options(method, draft, gamma, controller, temperature, top_k, top_p, max_new_tokens, seed) -> dict:
    """The page's (or the API's) values as ``explorer.stream`` keywords; numbers must be whole where the
    engine counts (γ, top-k, tokens, seed). Ranges are the engine's to check."""
    method = text("method", method) or ""
    draft = text("draft", draft)
    return {
        "method": method,
        "draft": None if method == "ar" else draft,
        "gamma": whole("γ (gamma)", gamma),
        "controller": text("controller", controller),
        "temperature": number("temperature", temperature),
        "top_k": whole("top-k", top_k),
        "top_p": number("top-p", top_p),
        "max_new_tokens": whole("max new tokens", max_new_tokens),
        "seed": whole("seed", seed),
    }


PRECISIONS = {"float32": "float32: the reference; lossless runs equal the float32 model's own decoding",
              "bfloat16": "bfloat16: half the bytes a forward reads; fast on CPUs with AMX"}


def precision(value) -> str:
    """The page's precision as a dtype ``explorer.stream`` takes; anything else refused in one line."""
    if value not in PRECISIONS:
        raise explorer.ExplorerError(f"precision must be one of {', '.join(PRECISIONS)}, got {clip(value)}")
    return value


def precision_info() -> str:
    """The dropdown's hint: whether this CPU runs bf16 natively (its units from ``explorer.machine``); what
    lossless means in bf16 is said with a run's result."""
    units = machine.describe()["units"]
    if "AMX" in units or "AVX-512 bf16" in units:
        return f"bf16 native here ({units[0]}): fewer bytes, faster"
    return f"no native bf16 here ({units[0] if units else 'no AVX2'}): verifying several tokens is slow"


def text(name: str, value) -> str | None:
    """A name typed in a box (a method, a draft spec, a controller): stripped text, None when blank."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise explorer.ExplorerError(f"{name} must be text such as 'early-exit:4', got {type(value).__name__} "
                                     f"{clip(value)}")
    return value.strip() or None


def whole(name: str, value) -> int:
    if isinstance(value, bool) or value is None:
        raise explorer.ExplorerError(f"{name} must be a whole number, got {clip(value)}")
    if isinstance(value, int):
        return value
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        raise explorer.ExplorerError(f"{name} must be a whole number, got {clip(value)}") from None
    if not as_float.is_integer():
        raise explorer.ExplorerError(f"{name} must be a whole number, got {clip(value)}")
    return int(as_float)


def number(name: str, value) -> float:
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise explorer.ExplorerError(f"{name} must be a number, got {clip(value)}") from None
    if not math.isfinite(result):
        raise explorer.ExplorerError(f"{name} must be a finite number, got {clip(value)}")
    return result
