"""``eesd``: EESD (Liu et al.): speculative decoding with a trained early-exit draft that shares the
target's first layers, stopped by Thompson sampling; draft, controller and γ come from the preset
shipped for the model (``exits.eesd_preset``) where the call does not give them.

EESD lives in this package: the exit layer and its artifacts (``exits``), the shared-cache draft
(``self_draft``, ``drafter``), cali-ts's θ_M predictor (``theta_predictor``) and the trainers
(``train_exit``, ``train_theta``). The Thompson-sampling controllers are in ``engine.controllers``: any
draft can use them."""

from __future__ import annotations

from ...drafts import make_drafter
from .. import Method, register
from . import drafter  # noqa: F401  (registers the early-exit draft kind)
from ..speculative import run_speculative
from .exits import eesd_preset
from .trainers import EXIT_TRAINER, THETA_TRAINER

register(Method(
    name="eesd",
    paper="EESD (Liu et al. 2024)",
    summary="EESD: speculative decoding with a trained early-exit draft that shares the target's first layers, "
            "and a Thompson-sampling stop rule (the shipped preset for this model)",
    lossy=False,
    options=None,
    start=lambda request, options: run_speculative(
        request, make_drafter(request.draft, request.target, request.load), "eesd"),
    preset=lambda target: eesd_preset(target.model),
    trainers=(EXIT_TRAINER, THETA_TRAINER),
))
