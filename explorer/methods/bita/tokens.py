"""BiTA's learnable tokens (Lin et al. 2024, section 3.1, Figure 2): P deep prompt tokens and M mask tokens
on a frozen target. Stored in ``assets/bita/`` as a safetensors file plus a JSON manifest, and found by the
target's fingerprint.

Prompt tokens are *deep*, prefix-style (section 2.3, Table 3's "bi-directional tuning"): each layer has
its own key and value for each of the P prompt tokens, written into the KV cache in front of the
context. Keys are stored as the attention sees them (after rotary embedding, like any cached key), so
they carry no position of their own. Only mask tokens attend to them (Figure 3); the target's own
predictions never see them. Mask tokens are M input embeddings: mask j of a group, placed j positions
after a token, predicts the token j + 1 positions after it (the target itself predicts the next one).

File format (``<fingerprint>.safetensors``; float16):
    ``prompt_keys``    (L, G, P, D)  per layer, per KV head, per prompt token
    ``prompt_values``  (L, G, P, D)
    ``masks``          (M, H)        mask-token input embeddings
Manifest (``<fingerprint>.json``): ``model``, ``fingerprint``, ``prompt_tokens``, ``mask_tokens`` and the
training figures (steps, seed, loss, samples, held-out acceptance trained vs untrained).

Shape legend: L layers, G KV heads, P prompt tokens, D head dim, M mask tokens, H hidden size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import DynamicCache

from ... import artifacts
from ...artifacts import fingerprint
from ...engine.cache import new_cache
from ...engine.forward import decoder_parts
from ...errors import ExplorerError

ARTIFACT_DIR = artifacts.ASSETS / "bita"
INIT_STD = 0.02  # section 4.1: "initialized with a normal distribution ... standard deviation of 0.02"
MAX_MASKS = 8


@dataclass(frozen=True, eq=False)
class BitaTokens:
    """Prompt keys/values and mask embeddings for one target model."""

    prompt_keys: torch.Tensor  # (L, G, P, D)
    prompt_values: torch.Tensor  # (L, G, P, D)
    masks: torch.Tensor  # (M, H)
    manifest: dict = field(default_factory=dict)
    path: Path | None = None

    @property
    def n_prompt(self) -> int:
        return int(self.prompt_keys.shape[2])

    @property
    def n_masks(self) -> int:
        return int(self.masks.shape[0])

    @property
    def trained(self) -> bool:
        return self.path is not None

    @property
    def name(self) -> str:
        """The tokens in the run's draft name (``bita:trained-p16-m3``): what they are, not their file's internal
        stem (the status read "bita:llama-L30-H576-V49152-…", #42)."""
        return f"{'trained' if self.trained else 'untrained'}-p{self.n_prompt}-m{self.n_masks}"

    def describe(self) -> str:
        if self.path is None:
            return f"untrained mask tokens ({self.n_masks} masks, {self.n_prompt} prompt tokens)"
        acc = self.manifest.get("heldout", {}).get("trained", {}).get("top1")
        extra = f", held-out top-1 of mask 1: {acc[0]:.0%}" if isinstance(acc, list) and acc else ""
        return f"trained BiTA tokens ({self.n_prompt} prompt, {self.n_masks} mask{extra})"

    def prompt_cache(self) -> DynamicCache:
        """A fresh cache (layers growing in place, ``engine.cache``) holding the P prompt tokens' keys and
        values in every layer (batch 1)."""
        cache = new_cache()
        if self.n_prompt:
            for i, (k, v) in enumerate(zip(self.prompt_keys, self.prompt_values)):
                cache.update(k[None], v[None], i)  # (1, G, P, D) each
        return cache


def _shapes(model: torch.nn.Module) -> tuple[int, int, int, int]:
    """(L, G, D, H) of a Llama-style decoder."""
    base = decoder_parts(model)
    cfg = model.config
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return len(base.layers), getattr(cfg, "num_key_value_heads", None) or heads, head_dim, cfg.hidden_size


def init_tokens(model: torch.nn.Module, n_prompt: int, n_masks: int, seed: int = 0) -> BitaTokens:
    """Fresh tokens, N(0, 0.02) as section 4.1 initialises them, on the model's device and dtype."""
    check_counts(n_prompt, n_masks)
    layers, kv_heads, head_dim, hidden = _shapes(model)
    gen = torch.Generator().manual_seed(seed)
    param = next(model.parameters())
    make = lambda *shape: (torch.randn(*shape, generator=gen) * INIT_STD).to(param.device, param.dtype)  # noqa: E731
    return BitaTokens(make(layers, kv_heads, n_prompt, head_dim), make(layers, kv_heads, n_prompt, head_dim),
                      make(n_masks, hidden))


def untrained_tokens(model: torch.nn.Module, n_masks: int = 3) -> BitaTokens:
    """Table 3's "mask tokens only", untrained: no prompt tokens, mask embeddings as initialised."""
    return init_tokens(model, 0, n_masks, seed=0)


def check_counts(n_prompt: int, n_masks: int) -> None:
    if not (isinstance(n_prompt, int) and 0 <= n_prompt <= 256):
        raise ExplorerError(f"the prompt-token count must be a whole number from 0 to 256, got {n_prompt!r}")
    if not (isinstance(n_masks, int) and 1 <= n_masks <= MAX_MASKS):
        raise ExplorerError(f"the mask-token count must be a whole number from 1 to {MAX_MASKS}, got {n_masks!r}")


def find_tokens(model: torch.nn.Module, folder: Path | None = None) -> Path | None:
    """The shipped (or trained) artifact for this model, if there is one."""
    return artifacts.find(folder or ARTIFACT_DIR, fingerprint(model))


def save_tokens(tokens: BitaTokens, model: torch.nn.Module, path: Path, manifest: dict) -> Path:
    """Write ``path`` (float16 tensors) and its ``.json`` manifest; returns ``path``."""
    tensors = {"prompt_keys": tokens.prompt_keys, "prompt_values": tokens.prompt_values, "masks": tokens.masks}
    return artifacts.write(path, {k: v.to(torch.float16) for k, v in tensors.items()}, model,
                           {"prompt_tokens": tokens.n_prompt, "mask_tokens": tokens.n_masks, **manifest})


def load_tokens(model: torch.nn.Module, path: Path) -> BitaTokens:
    """Load an artifact onto ``model``'s device and dtype; a clear error when it does not fit."""
    tensors, manifest = artifacts.read(path, model, "the BiTA tokens")
    layers, kv_heads, head_dim, hidden = _shapes(model)
    keys, values, masks = (tensors.get(n) for n in ("prompt_keys", "prompt_values", "masks"))
    if keys is None or values is None or masks is None or keys.shape != values.shape \
            or tuple(keys.shape[:2]) + tuple(keys.shape[3:]) != (layers, kv_heads, head_dim) or masks.shape[1] != hidden:
        raise ExplorerError(f"the BiTA tokens {Path(path).name} do not have this model's shapes")
    param = next(model.parameters())
    move = lambda t: t.to(param.device, param.dtype)  # noqa: E731
    return BitaTokens(move(keys), move(values), move(masks), manifest, Path(path))


def tokens_for(model: torch.nn.Module, spec: str | None = None, n_masks: int | None = None) -> BitaTokens:
    """``spec``: None or ``auto`` (the shipped tokens for this model, else untrained), ``untrained``, or
    the path of a ``.safetensors`` artifact. ``n_masks`` uses the first masks of a trained set (or sets
    the untrained count)."""
    spec = (spec or "auto").strip()
    if spec == "untrained":
        path = None
    elif spec == "auto":
        path = find_tokens(model)
    else:
        path = Path(spec)
        if not path.is_file():
            raise ExplorerError(f"no BiTA tokens at {spec!r}: use auto, untrained or the path of a .safetensors file")
    if path is None:
        return untrained_tokens(model, 3 if n_masks is None else n_masks)
    tokens = load_tokens(model, path)
    if n_masks is None or n_masks == tokens.n_masks:
        return tokens
    check_counts(tokens.n_prompt, n_masks)
    if n_masks > tokens.n_masks:
        raise ExplorerError(f"{path.name} has {tokens.n_masks} trained mask tokens; ask for at most that many "
                            f"(got {n_masks})")
    return BitaTokens(tokens.prompt_keys, tokens.prompt_values, tokens.masks[:n_masks], tokens.manifest, tokens.path)
