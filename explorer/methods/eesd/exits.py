"""Trained early-exit heads (EESD 3.1): one decoder layer + its norm on top of the target's first N
layers, optionally scoring only a subset of the vocabulary. Stored in ``assets/early-exit/`` as a
safetensors file plus a JSON manifest, and found by the target's fingerprint and N.

File format (``<slug>-n<N>.safetensors``):
    ``layer.*``   the exit layer's parameters (a ``LlamaDecoderLayer``'s state dict), float16
    ``norm.*``    its RMSNorm, float16
    ``vocab``     (optional) int32 ids of the LM-head rows the draft scores; the head itself is the
                  target's, shared and frozen (EESD trains it too; here it stays shared so the artifact
                  stays a few MB). A draft restricted to frequent tokens is ≈ 6× cheaper per step on the
                  CPU, where the 49152-row head is the largest single cost of a draft step.
Manifest (``<slug>-n<N>.json``): ``model``, ``fingerprint``, ``n_layers``, ``vocab_size``, training
figures (tokens, steps, seed, loss) and held-out greedy agreement trained vs untrained.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ... import artifacts
from ...artifacts import fingerprint  # noqa: F401 (the trainers and tests name it here)
from ...engine.forward import decoder_parts
from ...errors import ExplorerError

ARTIFACT_DIR = artifacts.ASSETS / "early-exit"


@dataclass(frozen=True, eq=False)
class ExitHead:
    """What an early-exit draft runs after the target's first N layers."""

    n_layers: int
    layer: torch.nn.Module | None  # None: untrained, the target's own norm + head straight after layer N
    norm: torch.nn.Module
    vocab: torch.Tensor | None = None  # (V',) ids the head scores; None = the whole vocabulary
    manifest: dict = field(default_factory=dict)
    path: Path | None = None

    @property
    def trained(self) -> bool:
        return self.layer is not None and self.path is not None

    def describe(self) -> str:
        if self.path is None:
            return f"untrained exit after layer {self.n_layers} (the model's own norm and head)"
        agree = self.manifest.get("heldout_agreement")
        extra = f", held-out agreement {agree:.0%}" if isinstance(agree, (int, float)) else ""
        return f"trained exit layer {self.path.name}{extra}"


def artifact_stem(model: torch.nn.Module, n_layers: int) -> str:
    return f"{fingerprint(model)}-n{n_layers}"


def find_exit(model: torch.nn.Module, n_layers: int, folder: Path | None = None) -> Path | None:
    """The shipped (or trained) artifact for this model and N, if there is one."""
    return artifacts.find(folder or ARTIFACT_DIR, artifact_stem(model, n_layers))


def untrained_exit(model: torch.nn.Module, n_layers: int) -> ExitHead:
    _check_n(model, n_layers)
    return ExitHead(n_layers, None, decoder_parts(model).norm)


def new_exit(model: torch.nn.Module, n_layers: int, vocab: torch.Tensor | None = None) -> ExitHead:
    """A fresh exit layer initialised from the target's last layer and final norm (EESD 3.1), with its
    own attention cache index 0 (it keeps a cache of its own, apart from the target's)."""
    _check_n(model, n_layers)
    base = decoder_parts(model)
    layer = copy.deepcopy(base.layers[-1])
    layer.self_attn.layer_idx = 0
    norm = copy.deepcopy(base.norm)
    return ExitHead(n_layers, layer, norm, vocab)


def load_exit(model: torch.nn.Module, path: Path) -> ExitHead:
    """Load an artifact onto ``model``'s device and dtype; a clear error when it does not fit."""
    tensors, manifest = artifacts.read(path, model, "the exit layer")
    vocab = tensors.pop("vocab", None)
    head = new_exit(model, int(manifest["n_layers"]), None)
    param = next(model.parameters())
    head.layer.load_state_dict({k[len("layer."):]: v for k, v in tensors.items() if k.startswith("layer.")})
    head.norm.load_state_dict({k[len("norm."):]: v for k, v in tensors.items() if k.startswith("norm.")})
    for module in (head.layer, head.norm):
        module.to(device=param.device, dtype=param.dtype).eval().requires_grad_(False)
    if vocab is not None:
        vocab = vocab.to(device=param.device, dtype=torch.long)
    return ExitHead(head.n_layers, head.layer, head.norm, vocab, manifest, Path(path))


def exit_for(model: torch.nn.Module, n_layers: int, trained: bool = True) -> ExitHead:
    """The trained exit for (model, N) when one ships, else the untrained one."""
    path = find_exit(model, n_layers) if trained else None
    return load_exit(model, path) if path is not None else untrained_exit(model, n_layers)


def save_exit(head: ExitHead, model: torch.nn.Module, folder: Path, manifest: dict) -> Path:
    """Write ``<stem>.safetensors`` + ``<stem>.json`` (float16 weights) and return the weights' path."""
    tensors = {f"layer.{k}": v.to(torch.float16) for k, v in head.layer.state_dict().items()}
    tensors.update({f"norm.{k}": v.to(torch.float16) for k, v in head.norm.state_dict().items()})
    if head.vocab is not None:
        tensors["vocab"] = head.vocab.to(torch.int32)
    manifest = {"n_layers": head.n_layers, "vocab_size": int(head.vocab.numel()) if head.vocab is not None else None,
                **manifest}
    return artifacts.write(Path(folder) / f"{artifact_stem(model, head.n_layers)}.safetensors", tensors, model, manifest)


def _check_n(model: torch.nn.Module, n_layers: int) -> None:
    total = len(decoder_parts(model).layers)
    if not 1 <= n_layers < total:
        raise ExplorerError(f"early-exit:N needs 1 <= N < {total} (the model has {total} layers), got {n_layers}")


def eesd_preset(model: torch.nn.Module) -> dict:
    """The ``eesd`` method's settings for this model: {draft, controller, gamma, why}, from
    ``assets/early-exit/presets.json`` (keyed by fingerprint; chosen there by measured speed)."""
    try:
        presets = json.loads((ARTIFACT_DIR / "presets.json").read_text())
    except (OSError, ValueError):
        presets = {}
    preset = presets.get(fingerprint(model))
    if preset is None:
        raise ExplorerError(
            "eesd needs a trained exit layer for this model and none ships: train one with "
            "`python -m explorer train early-exit --model <spec> --layers N`, then use "
            "method speculative with draft early-exit:N and controller beta-ts"
        )
    return preset
