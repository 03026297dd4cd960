"""``eesd``: EESD (Liu et al.): speculative decoding with a trained early-exit draft that shares the
target's first layers, stopped by Thompson sampling; draft, controller and γ come from the preset
shipped for the model (``exits.eesd_preset``) where the call does not give them."""

from __future__ import annotations

from ..drafts import make_drafter
from ..exits import eesd_preset
from . import Method, register
from .speculative import run_speculative

register(Method(
    name="eesd",
    summary="EESD: speculative decoding with a trained early-exit draft that shares the target's first layers, "
            "and a Thompson-sampling stop rule (the shipped preset for this model)",
    lossy=False,
    options=None,
    start=lambda request, options: run_speculative(
        request, make_drafter(request.draft, request.target, request.load), "eesd"),
    preset=lambda target: eesd_preset(target.model),
))
