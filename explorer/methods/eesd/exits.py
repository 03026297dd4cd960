"""Trained early-exit heads (EESD 3.1): one decoder layer (or a few) + a norm on top of the target's first
N layers, optionally scoring only a subset of the vocabulary. Stored in ``assets/early-exit/`` as a
safetensors file plus a JSON manifest, and found by the target's fingerprint and N.

File format (``<slug>-n<N>.safetensors``):
    ``layers.<i>.*`` the exit layers' parameters (``LlamaDecoderLayer`` state dicts), float16; the
                  manifest's ``exit_layers`` says how many (EESD uses one; two were measured too)
    ``norm.*``    its RMSNorm, float16
    ``vocab``     (optional) int32 ids of the LM-head rows the draft scores; the head itself is the
                  target's, shared and frozen (EESD trains it too; here it stays shared so the artifact
                  stays a few MB). A draft restricted to frequent tokens is ≈ 6× cheaper per step on the
                  CPU, where the 49152-row head is the largest single cost of a draft step.
Manifest (``<slug>-n<N>.json``): ``model``, ``fingerprint``, ``n_layers``, ``exit_layers``, ``vocab_size``,
training figures (tokens, steps, seed, loss) and held-out greedy agreement trained vs untrained.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ... import artifacts
from ...artifacts import fingerprint  # noqa: F401 (the trainers and tests name it here)
from ...engine.forward import decoder_parts
from ...errors import ExplorerError

ARTIFACT_DIR = artifacts.ASSETS / "early-exit"
MAX_EXIT_LAYERS = 4


@dataclass(frozen=True, eq=False)
class ExitHead:
    """What an early-exit draft runs after the target's first N layers."""

    n_layers: int
    layers: tuple[torch.nn.Module, ...]  # the exit's own layers; none: untrained, the target's norm + head after N
    norm: torch.nn.Module
    vocab: torch.Tensor | None = None  # (V',) ids the head scores; None = the whole vocabulary
    manifest: dict = field(default_factory=dict)
    path: Path | None = None

    @property
    def trained(self) -> bool:
        return bool(self.layers) and self.path is not None

    def describe(self) -> str:
        if self.path is None:
            return f"untrained exit after layer {self.n_layers} (the model's own norm and head)"
        agree = self.manifest.get("heldout_agreement")
        extra = f", held-out agreement {agree:.0%}" if isinstance(agree, (int, float)) else ""
        return f"trained exit layer{extra}"  # its file is an internal name: a reader wants what it measured


def artifact_stem(model: torch.nn.Module, n_layers: int) -> str:
    return f"{fingerprint(model)}-n{n_layers}"


def find_exit(model: torch.nn.Module, n_layers: int, folder: Path | None = None) -> Path | None:
    """The shipped (or trained) artifact for this model and N, if there is one."""
    return artifacts.find(folder or ARTIFACT_DIR, artifact_stem(model, n_layers))


def shipped_depths(model: torch.nn.Module | None = None, folder: Path | None = None) -> list[int]:
    """The N of every exit layer in ``folder`` (default: the shipped ones), for ``model`` where given (its
    fingerprint), else for any model: what the drafter menu offers and what a missing exit's words name, read from
    the artifacts so neither falls behind what is trained."""
    prefix = f"{fingerprint(model)}-n" if model is not None else ""
    depths = set()
    for path in Path(folder or ARTIFACT_DIR).glob(f"{prefix}*.safetensors"):
        found = re.search(r"-n(\d+)$", path.stem)
        if found and artifacts.find(path.parent, path.stem) is not None:
            depths.add(int(found.group(1)))
    return sorted(depths)


def untrained_exit(model: torch.nn.Module, n_layers: int) -> ExitHead:
    _check_n(model, n_layers)
    return ExitHead(n_layers, (), decoder_parts(model).norm)


def new_exit(model: torch.nn.Module, n_layers: int, vocab: torch.Tensor | None = None,
             exit_layers: int = 1) -> ExitHead:
    """A fresh exit initialised from the target's last ``exit_layers`` layers and final norm (EESD 3.1),
    with their own attention cache indices 0, 1, … (the exit keeps a cache of its own, apart from the
    target's)."""
    _check_n(model, n_layers)
    base = decoder_parts(model)
    if not 1 <= exit_layers <= MAX_EXIT_LAYERS:
        raise ExplorerError(f"an exit has 1 to {MAX_EXIT_LAYERS} layers of its own, got {exit_layers}")
    layers = tuple(copy.deepcopy(layer) for layer in base.layers[-exit_layers:])
    for index, layer in enumerate(layers):
        layer.self_attn.layer_idx = index
    norm = copy.deepcopy(base.norm)
    return ExitHead(n_layers, layers, norm, vocab)


def load_exit(model: torch.nn.Module, path: Path) -> ExitHead:
    """Load an artifact onto ``model``'s device and dtype; a clear error when it does not fit."""
    tensors, manifest = artifacts.read(path, model, "the exit layer")
    vocab = tensors.pop("vocab", None)
    try:
        head = new_exit(model, int(manifest["n_layers"]), None, int(manifest.get("exit_layers", 1)))
        for i, layer in enumerate(head.layers):
            layer.load_state_dict(_prefixed(tensors, f"layers.{i}."))
        head.norm.load_state_dict(_prefixed(tensors, "norm."))
    except (KeyError, ValueError, RuntimeError) as err:
        raise ExplorerError(f"the exit layer {Path(path).name} does not fit this model: {str(err)[:160]}") from None
    param = next(model.parameters())
    for module in (*head.layers, head.norm):
        module.to(device=param.device, dtype=param.dtype).eval().requires_grad_(False)
    if vocab is not None:
        vocab = vocab.to(device=param.device, dtype=torch.long)
    return ExitHead(head.n_layers, head.layers, head.norm, vocab, manifest, Path(path))


def _prefixed(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}


def exit_for(model: torch.nn.Module, n_layers: int, trained: bool = True) -> ExitHead:
    """The trained exit for (model, N) when one ships, else the untrained one."""
    path = find_exit(model, n_layers) if trained else None
    return load_exit(model, path) if path is not None else untrained_exit(model, n_layers)


def save_exit(head: ExitHead, model: torch.nn.Module, folder: Path, manifest: dict) -> Path:
    """Write ``<stem>.safetensors`` + ``<stem>.json`` (float16 weights) and return the weights' path."""
    tensors = {f"layers.{i}.{k}": v.to(torch.float16) for i, layer in enumerate(head.layers)
               for k, v in layer.state_dict().items()}
    tensors.update({f"norm.{k}": v.to(torch.float16) for k, v in head.norm.state_dict().items()})
    if head.vocab is not None:
        tensors["vocab"] = head.vocab.to(torch.int32)
    manifest = {"n_layers": head.n_layers, "exit_layers": len(head.layers), "vocab_size": int(head.vocab.numel()) if head.vocab is not None else None,
                **manifest}
    return artifacts.write(Path(folder) / f"{artifact_stem(model, head.n_layers)}.safetensors", tensors, model, manifest)


def _check_n(model: torch.nn.Module, n_layers: int) -> None:
    total = len(decoder_parts(model).layers)
    if not 1 <= n_layers < total:
        raise ExplorerError(f"early-exit:N needs 1 <= N < {total} (the model has {total} layers), got {n_layers}")


def eesd_preset(model: torch.nn.Module) -> dict:
    """The ``eesd`` method's settings for this model: {draft, controller, gamma, why}, from
    ``assets/early-exit/presets.json`` (keyed by fingerprint; chosen there by measured speed)."""
    return artifacts.preset(
        ARTIFACT_DIR, model,
        "eesd needs a trained exit layer for this model and none ships: train one with "
        "`python -m explorer train early-exit --model <spec> --layers N`, then use "
        "method speculative with draft early-exit:N and controller beta-ts")
