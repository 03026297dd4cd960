"""Draft-length controllers: how many tokens to draft in the next round.

A controller answers ``draft_length(evidence)`` before a round (``evidence``: what the drafter says its
next draft rests on, or None; see ``drafters``; given only to a controller with ``uses_evidence``), may
stop a draft early through ``keep_drafting(step, q_row)`` (the seam for EESD's Thompson-sampling stop
rule), and learns from the round's outcome in ``update``, which returns the state record that goes into
the round's trace.
``update`` also receives the round's timing, for controllers that price drafting (``cost-aware``).

This module is the contract and the registry (``make_controller``); the controllers live by job:
``schedules`` (fixed, heuristic: nothing measured), ``priced`` (the measured costs, cost-aware, dynamic-gamma),
``thompson`` (EESD's Thompson-sampling stop rules).
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from ...errors import ExplorerError
from ...limits import MAX_GAMMA
from ...trace import Timing
from .priced import CostAware, DynamicGamma, StepCosts
from .schedules import Confident, Fixed, Heuristic
from .thompson import BetaTS, CaliTS


DEFAULT_GAMMA = 4  # tokens drafted per round when a call names none (every entry point reads it here)
DEFAULT_CONTROLLER = "fixed"


class Controller(Protocol):
    kind: str

    def draft_length(self, evidence: str | None = None) -> int: ...

    def keep_drafting(self, step: int, q_row: torch.Tensor | None) -> bool: ...

    def update(self, drafted: int, accepted: int, timing: Timing | None = None,
               draft_forwards: int = 0) -> dict[str, Any]: ...


CONTROLLERS = {"fixed": Fixed, "heuristic": Heuristic, "confident": Confident, "cost-aware": CostAware, "beta-ts": BetaTS, "cali-ts": CaliTS,
               "beta-ts-priced": BetaTS, "cali-ts-priced": CaliTS, "dynamic-gamma": DynamicGamma,
               "dynamic-gamma-priced": DynamicGamma}
PRICED = ("cost-aware", "beta-ts-priced", "cali-ts-priced", "dynamic-gamma-priced")  # the controllers that need the verify-cost curve


def make_controller(name: str, gamma: int, verify_curve=None, seed: int = 0, drafter=None) -> Controller:
    """A controller by name; ``verify_curve`` (seconds per forward of 1, 2, … tokens, or a function that
    measures it) for the priced ones; ``seed`` for the Thompson samplers' draws. ``drafter`` (a
    ``drafters.Drafter``) gives what a controller may learn from the draft: cali-ts its trained θ_M
    predictor (EESD eq. 5), cost-aware the acceptance measured offline as its prior."""
    check_controller(name, gamma)
    curve = (verify_curve() if callable(verify_curve) else verify_curve) if name in PRICED else None
    if name == "cost-aware":
        controller = CostAware(gamma, curve)
        controller.prior_alpha = getattr(drafter, "expected_acceptance", None)
        return controller
    costs = StepCosts(gamma, curve) if curve is not None else None
    if name.startswith("beta-ts"):
        return BetaTS(gamma, seed, costs=costs)
    if name.startswith("cali-ts"):
        return CaliTS(gamma, seed, getattr(drafter, "theta_model", None), costs=costs)
    if name.startswith("dynamic-gamma"):
        controller = DynamicGamma(gamma, curve)
        controller.prior_alpha = getattr(drafter, "expected_acceptance", None)
        return controller
    return CONTROLLERS[name](gamma)


def check_controller(name: str, gamma: int) -> None:
    """``ExplorerError`` with one line unless ``name`` is a controller and γ a whole number in range."""
    if not isinstance(gamma, int) or isinstance(gamma, bool) or not 1 <= gamma <= MAX_GAMMA:
        raise ExplorerError(f"gamma must be a whole number from 1 to {MAX_GAMMA}, got {gamma!r}")
    if name not in CONTROLLERS:
        raise ExplorerError(f"unknown controller {name!r}: use one of {', '.join(CONTROLLERS)}")
