"""The feature-level draft head (EAGLE, Li et al. 2024, section 4.1) and its shipped artifact.

EAGLE drafts in the target's feature space: with f_t the target's last-layer feature at position t (its
final normed state, what the LM head reads) and e(x_{t+1}) the embedding of the token that follows,

    f̂_{t+1} = Norm(Layers(FC([e(x_{t+1}); f_t])))            p̂(x_{t+2}) = softmax(LM-head(f̂_{t+1}))

and the next draft step feeds f̂_{t+1} back in place of f_{t+1}, with the drafted token's embedding. The
embedding and the LM head are the target's own, shared and frozen; FC (2H → H), the decoder layer(s) and
the norm are trained (``train``). The layers attend over the head's own KV cache of earlier positions,
built from the target's true features wherever the target has run.

Differences from the paper, each measured in ``train``'s notes and docs/measurements.md: a final RMSNorm
(initialised from the target's) so the predicted feature lives on the scale the LM head expects; the
decoder layers start as copies of the target's last layers; the head may score only V' rows of the LM
head (``vocab``: the V' most frequent answer tokens and EOS; q is 0 elsewhere, which keeps sampling
exact), as a trained exit may.

Artifact (``assets/feature-head/<fingerprint>.safetensors`` + ``.json``): ``fc.*``, ``layers.<i>.*``,
``norm.*`` in float16 and ``vocab`` (int32); the manifest says what it was trained on and its held-out
acceptance by draft position.

Shape legend: T positions, H hidden size, V' scored rows.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from ... import artifacts
from ...artifacts import fingerprint
from ...engine.forward import decoder_parts
from ...errors import ExplorerError

ARTIFACT_DIR = artifacts.ASSETS / "feature-head"
MAX_LAYERS = 4


class FeatureHead(torch.nn.Module):
    """FC over [embedding; feature], ``len(layers)`` decoder layers with their own KV cache, a norm."""

    def __init__(self, fc: torch.nn.Linear, layers: torch.nn.ModuleList, norm: torch.nn.Module,
                 vocab: torch.Tensor | None = None, manifest: dict | None = None, path: Path | None = None):
        super().__init__()
        self.fc, self.layers, self.norm = fc, layers, norm
        self.vocab = vocab  # (V',) ids the head scores, None = all; a plain attribute (not trained)
        self.manifest = dict(manifest or {})
        self.path = None if path is None else Path(path)

    @property
    def trained(self) -> bool:
        return self.path is not None

    def inputs(self, embedded: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """FC([e(x_{t+1}); f_t]): (…, H) and (…, H) -> (…, H)."""
        return self.fc(torch.cat([embedded, features], dim=-1))

    def describe(self) -> str:
        if self.path is None:
            return "untrained feature head (random FC, copies of the target's last layers)"
        accept = self.manifest.get("heldout_acceptance")
        extra = f", held-out first-draft acceptance {accept[0]:.0%}" if isinstance(accept, list) and accept else ""
        return f"trained feature head{extra}"


def new_head(model: torch.nn.Module, n_layers: int = 1, vocab: torch.Tensor | None = None,
             seed: int = 0) -> FeatureHead:
    """A fresh head for ``model``: FC with a seeded default init, the target's last ``n_layers`` layers
    and final norm copied (cache indices 0…n−1: the head keeps a cache of its own)."""
    base = decoder_parts(model)
    if not 1 <= n_layers <= min(MAX_LAYERS, len(base.layers)):
        raise ExplorerError(f"a feature head has 1 to {min(MAX_LAYERS, len(base.layers))} layers, got {n_layers}")
    hidden = base.config.hidden_size
    param = next(model.parameters())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fc = torch.nn.Linear(2 * hidden, hidden, bias=True)
    layers = torch.nn.ModuleList(copy.deepcopy(layer) for layer in base.layers[-n_layers:])
    for index, layer in enumerate(layers):
        layer.self_attn.layer_idx = index
    head = FeatureHead(fc, layers, copy.deepcopy(base.norm), vocab)
    return head.to(device=param.device, dtype=param.dtype).eval().requires_grad_(False)


def find_head(model: torch.nn.Module, folder: Path | None = None) -> Path | None:
    """The shipped (or trained) head for this model, if there is one."""
    return artifacts.find(folder or ARTIFACT_DIR, fingerprint(model))


def load_head(model: torch.nn.Module, path: Path) -> FeatureHead:
    """An artifact on ``model``'s device and dtype; a clear error when it does not fit."""
    tensors, manifest = artifacts.read(path, model, "the feature head")
    vocab = tensors.pop("vocab", None)
    try:
        head = new_head(model, int(manifest["n_layers"]))
        head.load_state_dict({k: v for k, v in tensors.items()})
    except (KeyError, ValueError, RuntimeError) as err:
        raise ExplorerError(f"the feature head {Path(path).name} does not fit this model: {str(err)[:160]}") from None
    param = next(model.parameters())
    head.to(device=param.device, dtype=param.dtype).eval().requires_grad_(False)
    head.vocab = None if vocab is None else vocab.to(device=param.device, dtype=torch.long)
    head.manifest, head.path = manifest, Path(path)
    return head


def head_for(model: torch.nn.Module, trained: bool = True) -> FeatureHead:
    """The shipped head for ``model`` when ``trained`` and one ships; else a fresh untrained one."""
    path = find_head(model) if trained else None
    return load_head(model, path) if path is not None else new_head(model)


def save_head(head: FeatureHead, model: torch.nn.Module, folder: Path, manifest: dict) -> Path:
    """Write ``<fingerprint>.safetensors`` (float16 weights, int32 vocab) + its manifest."""
    tensors = {k: v.to(torch.float16) for k, v in head.state_dict().items()}
    if head.vocab is not None:
        tensors["vocab"] = head.vocab.to(torch.int32)
    manifest = {"n_layers": len(head.layers),
                "vocab_size": int(head.vocab.numel()) if head.vocab is not None else None, **manifest}
    return artifacts.write(Path(folder) / f"{fingerprint(model)}.safetensors", tensors, model, manifest)


def eagle_preset(model: torch.nn.Module) -> dict:
    """The ``eagle`` method's settings for this model: {draft, controller, gamma, why}, from
    ``assets/feature-head/presets.json`` (keyed by fingerprint; chosen there by measured speed)."""
    return artifacts.preset(
        ARTIFACT_DIR, model,
        "eagle needs a trained feature head for this model and none ships: train one with "
        "`python -m explorer train feature-head --model <spec>`, or run method speculative with "
        "draft feature-head:untrained to see the mechanics")
