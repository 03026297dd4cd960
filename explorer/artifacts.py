"""Shipped trained parts (an exit layer, a θ_M predictor, BiTA's tokens): one file format, written once.

An artifact is ``<stem>.safetensors`` (the tensors) beside ``<stem>.json`` (its manifest: what it is, how
it was trained, what it measured). Its stem starts with the fingerprint of the model it was trained on,
and loading checks the manifest's fingerprint against the model's, so a part never runs on a model it
does not fit. ``assets/<kind>/`` holds the shipped ones; the trainers write there by default.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from .errors import ExplorerError
from .shipped import ASSETS


def fingerprint(model: torch.nn.Module) -> str:
    """Architecture + shape + a hash of the first embedding rows: a trained part fits only this model. A model
    loaded in another dtype carries the fingerprint of its float32 weights (``models.load``)."""
    if isinstance(getattr(model, "explorer_fingerprint", None), str):
        return model.explorer_fingerprint
    cfg = model.config
    emb = model.get_input_embeddings().weight
    digest = hashlib.sha1(emb[:8].detach().float().cpu().numpy().tobytes()).hexdigest()[:12]
    return f"{cfg.model_type}-L{cfg.num_hidden_layers}-H{cfg.hidden_size}-V{emb.shape[0]}-{digest}"


def preset(folder: Path, model: torch.nn.Module, missing: str) -> dict:
    """The settings measured best for ``model`` in ``folder/presets.json`` (keyed by fingerprint): {draft,
    controller, gamma, why}; ``ExplorerError(missing)`` when none is there for it."""
    try:
        presets = json.loads((Path(folder) / "presets.json").read_text())
    except (OSError, ValueError):
        presets = {}
    chosen = presets.get(fingerprint(model)) if isinstance(presets, dict) else None
    if not isinstance(chosen, dict):
        raise ExplorerError(missing)
    return chosen


def find(folder: Path, stem: str) -> Path | None:
    """``folder/<stem>.safetensors`` when it and its manifest are there, else None."""
    path = Path(folder) / f"{stem}.safetensors"
    return path if path.is_file() and path.with_suffix(".json").is_file() else None


def write(path: Path, tensors: dict[str, torch.Tensor], model: torch.nn.Module, manifest: dict) -> Path:
    """Write the tensors (contiguous, on the CPU, in their dtypes) and the manifest, which gets the
    model's fingerprint first; returns ``path``."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(path))
    path.with_suffix(".json").write_text(json.dumps({"fingerprint": fingerprint(model), **manifest}, indent=2) + "\n")
    return path


def read(path: Path, model: torch.nn.Module, what: str) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors, manifest) of the artifact at ``path`` for ``model``; ``ExplorerError`` naming ``what``
    (e.g. "the exit layer") when it cannot be read or was trained for another model."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    try:
        manifest = json.loads(path.with_suffix(".json").read_text())
        tensors = load_file(str(path))
    except (OSError, ValueError, SafetensorError) as err:
        raise ExplorerError(f"cannot read {what} {path.name}: {err}") from None
    if not isinstance(manifest, dict) or manifest.get("fingerprint") != fingerprint(model):
        found = manifest.get("fingerprint") if isinstance(manifest, dict) else None
        raise ExplorerError(f"{what} {path.name} was trained for another model ({found})")
    return tensors, manifest
