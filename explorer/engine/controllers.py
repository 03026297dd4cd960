"""Draft-length controllers: how many tokens to draft in the next round.

A controller answers ``draft_length()`` before a round, may stop a draft early through
``keep_drafting(step, q_row)`` (the seam for EESD's Thompson-sampling stop rule), and learns from the
round's outcome in ``update``, which returns the state record that goes into the round's trace.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from ..errors import ExplorerError

MAX_GAMMA = 64


class Controller(Protocol):
    kind: str

    def draft_length(self) -> int: ...

    def keep_drafting(self, step: int, q_row: torch.Tensor | None) -> bool: ...

    def update(self, drafted: int, accepted: int) -> dict[str, Any]: ...


class Fixed:
    """Always γ drafts (Leviathan et al., Algorithm 1)."""

    kind = "fixed"

    def __init__(self, gamma: int):
        self.gamma = gamma

    def draft_length(self) -> int:
        return self.gamma

    def keep_drafting(self, step: int, q_row: torch.Tensor | None) -> bool:
        return True

    def update(self, drafted: int, accepted: int) -> dict[str, Any]:
        return {"kind": self.kind, "gamma": self.gamma}


class Heuristic:
    """The Hugging Face assisted-generation schedule: +2 after a fully accepted round, −1 otherwise
    (never below 1), starting from γ."""

    kind = "heuristic"

    def __init__(self, gamma: int):
        self.gamma = gamma

    def draft_length(self) -> int:
        return self.gamma

    def keep_drafting(self, step: int, q_row: torch.Tensor | None) -> bool:
        return True

    def update(self, drafted: int, accepted: int) -> dict[str, Any]:
        before = self.gamma
        if drafted > 0:
            grown = self.gamma + 2 if accepted == drafted else self.gamma - 1
            self.gamma = min(MAX_GAMMA, max(1, grown))
        return {"kind": self.kind, "gamma_before": before, "gamma_after": self.gamma}


CONTROLLERS = {"fixed": Fixed, "heuristic": Heuristic}


def make_controller(name: str, gamma: int) -> Controller:
    if not isinstance(gamma, int) or isinstance(gamma, bool) or not 1 <= gamma <= MAX_GAMMA:
        raise ExplorerError(f"gamma must be a whole number from 1 to {MAX_GAMMA}, got {gamma!r}")
    try:
        return CONTROLLERS[name](gamma)
    except KeyError:
        raise ExplorerError(f"unknown controller {name!r}: use one of {', '.join(CONTROLLERS)}") from None
