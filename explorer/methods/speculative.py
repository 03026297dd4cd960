"""``speculative``: speculative sampling (Leviathan et al., Algorithm 1) with any draft and any
draft-length controller; lossless."""

from __future__ import annotations

from ..engine.controllers import make_controller
from ..engine.costs import verify_cost_curve
from ..drafts import make_drafter
from ..engine.drafters import Drafter
from ..engine.speculative import decode_rounds
from ..run import Decoding
from . import Method, Request, register


def run_speculative(request: Request, drafter: Drafter | None, name: str, lenience: float = 1.0,
                    draft: tuple[str, str] | None = None) -> Decoding:
    """The round loop of Algorithm 1 with ``drafter`` (None: ``ar``) and the request's controller;
    ``lenience`` < 1: Appendix A.5's lossy accept rule. ``draft``: (spec, about) naming in the trace what wrote
    its text where that is no drafter (the 4-bit copy decoding alone: ``ar`` over the copy as the request's
    target)."""
    target, s = request.target, request.settings
    controller = "fixed" if drafter is None else s.controller  # nothing to control without a draft
    ctrl = make_controller(controller, s.gamma, lambda: verify_cost_curve(target, max_tokens=s.gamma + 1), s.seed,
                           drafter)
    rounds = decode_rounds(target, drafter, ctrl, request.sampling, request.prompt_ids, s.max_new_tokens,
                           request.rng(), lenience)
    spec, about = draft or ((drafter.spec, drafter.about) if drafter else (None, None))
    return Decoding(request, name, spec, s, rounds, about)


def start(request: Request, options) -> Decoding:
    return run_speculative(request, make_drafter(request.draft, request.target, request.load), "speculative")


register(Method(
    name="speculative",
    paper="Leviathan et al. 2023",
    summary="speculative sampling (Leviathan et al.): draft γ tokens, verify them in one target pass",
    lossy=False,
    options=None,
    start=start,
))
