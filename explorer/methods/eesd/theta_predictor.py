"""Calibrated TS's trained acceptance predictor θ_M (EESD eq. 5), for an early-exit draft.

The paper scores draft step i of a round that starts after t committed tokens as

    θ_M^{t+i} = Sigmoid(W_p (W^i H_t^(T), H_{t+i}^(D)))                                        (eq. 5)

with H_t^(T) the target's last-layer hidden state at t, H_{t+i}^(D) the draft's, W^i ∈ R^{d×d} for
i = 1..10 (i > 10 shares W^10) and W_p ∈ R^{2×2d}. Here W^i is diagonal and W_p gives one logit (the
difference of its two rows), so the score is the linear form

    logit = u_i · H_t^(T) + v · H_{t+i}^(D) + b,      u_i = w_p^T ⊙ diag(W^i),  v = w_p^D

— 11·d + 1 parameters (6 337 on the default model) instead of 10·d² + 4d: the predictor has to stay cheap
next to a draft step, and on this machine it is trained from a few thousand rounds.

Which states (both after the final norm, as the LM heads read them): H_t^(T) is the target's state at
the position that produced the round's last committed token (the freshest target state when the round
starts), H_{t+i}^(D) the exit head's state that produced draft token i. Label (the paper's χ): draft
token i is accepted, i.e. it and every earlier draft of the round equal the target's greedy tokens.

Stored beside the exit as ``<slug>-n<N>-theta.safetensors`` (``u``, ``v``, ``b``, float32) + ``.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from ... import artifacts
from ...errors import ExplorerError
from .exits import ARTIFACT_DIR, artifact_stem

MAX_STEP = 10  # W^i for i = 1..10; later steps share W^10 (eq. 5)


@dataclass(eq=False)
class ThetaPredictor:
    """θ_M = sigmoid(u_min(i,10) · h_target + v · h_draft + b)."""

    u: torch.Tensor  # (MAX_STEP, H)
    v: torch.Tensor  # (H,)
    b: torch.Tensor  # ()
    manifest: dict = field(default_factory=dict)
    path: Path | None = None

    @classmethod
    def zeros(cls, hidden: int) -> "ThetaPredictor":
        return cls(torch.zeros(MAX_STEP, hidden), torch.zeros(hidden), torch.zeros(()))

    def logit(self, step: torch.Tensor, h_target: torch.Tensor, h_draft: torch.Tensor) -> torch.Tensor:
        """Batched: ``step`` (P,) 1-based draft steps, ``h_target`` and ``h_draft`` (P, H) -> (P,)."""
        every = h_target @ self.u.T  # (P, MAX_STEP): one matmul, then each row's own W^i column
        return every.gather(1, (step.clamp(1, MAX_STEP) - 1)[:, None])[:, 0] + h_draft @ self.v + self.b

    def __call__(self, step: int, h_target: torch.Tensor, h_draft: torch.Tensor) -> float:
        """θ_M for 1-based draft step ``step`` from one target and one draft state (H,)."""
        u = self.u[min(max(step, 1), MAX_STEP) - 1]
        return float(torch.sigmoid(u @ h_target.float() + self.v @ h_draft.float() + self.b))

    def to(self, device) -> "ThetaPredictor":
        return ThetaPredictor(self.u.to(device), self.v.to(device), self.b.to(device), self.manifest, self.path)


def predictor_path(model: torch.nn.Module, n_layers: int, folder: Path | None = None) -> Path:
    return (folder or ARTIFACT_DIR) / f"{artifact_stem(model, n_layers)}-theta.safetensors"


def find_predictor(model: torch.nn.Module, n_layers: int, folder: Path | None = None) -> Path | None:
    return artifacts.find(folder or ARTIFACT_DIR, f"{artifact_stem(model, n_layers)}-theta")


def save_predictor(predictor: ThetaPredictor, model: torch.nn.Module, n_layers: int, folder: Path,
                   manifest: dict) -> Path:
    tensors = {"u": predictor.u.float(), "v": predictor.v.float(), "b": predictor.b.float().reshape(1)}
    return artifacts.write(predictor_path(model, n_layers, folder), tensors, model, {"n_layers": n_layers, **manifest})


def load_predictor(model: torch.nn.Module, path: Path) -> ThetaPredictor:
    tensors, manifest = artifacts.read(path, model, "the θ_M predictor")
    hidden = model.config.hidden_size
    u, v, b = tensors.get("u"), tensors.get("v"), tensors.get("b")
    if u is None or v is None or b is None or u.shape != (MAX_STEP, hidden) or v.shape != (hidden,) or b.numel() != 1:
        raise ExplorerError(f"the θ_M predictor {Path(path).name} does not have this model's shapes")
    device = next(model.parameters()).device
    return ThetaPredictor(u.to(device), v.to(device), b.reshape(()).to(device), manifest, Path(path))
