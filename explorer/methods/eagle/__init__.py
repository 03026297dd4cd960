"""``eagle``: speculative decoding with EAGLE's feature-level draft (Li et al. 2024): a one-layer head drafts
in the target's feature space — from the target's last-layer feature at t and the embedding of token t+1
it predicts the feature at t+1 and reads the next token through the target's own LM head — and the target
verifies (Leviathan et al., Algorithm 1); lossless. Controller and γ come from the preset shipped for the
model (``head.eagle_preset``) where the call does not give them.

This package holds the head and its artifact (``head``), the drafter and the verifier that keeps the
target's features (``drafter``) and the trainer (``train``). The draft spec ``feature-head`` also runs
under ``speculative`` and ``lenient`` with any controller."""

from __future__ import annotations

from ...drafts import make_drafter
from .. import Method, register
from . import drafter  # noqa: F401  (registers the feature-head draft kind)
from ..speculative import run_speculative
from .head import eagle_preset
from .trainer import FEATURE_HEAD_TRAINER

register(Method(
    name="eagle",
    paper="EAGLE (Li et al. 2024)",
    summary="EAGLE: speculative decoding with a trained feature-level draft head that predicts the target's next "
            "last-layer feature and reuses its LM head (the shipped preset for this model)",
    lossy=False,
    options=None,
    start=lambda request, options: run_speculative(
        request, make_drafter(request.draft, request.target, request.load), "eagle"),
    preset=lambda target: eagle_preset(target.model),
    trainers=(FEATURE_HEAD_TRAINER,),
))
