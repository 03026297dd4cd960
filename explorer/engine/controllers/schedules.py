"""Controllers that draft a length they set themselves, with nothing measured: a fixed γ (Leviathan et al.)
and Hugging Face's heuristic schedule. ``WholeDraft``, the base every controller here and in ``priced`` builds
on, never stops a draft early."""

from __future__ import annotations

from typing import Any

import torch

from ...limits import MAX_GAMMA


class WholeDraft:
    """A controller that never stops a draft early: the round drafts the length ``draft_length`` chose (only
    the Thompson-sampling rules, ``thompson``, stop a draft step by step)."""

    def keep_drafting(self, step: int, q_row: torch.Tensor | None) -> bool:
        return True


class GammaSchedule(WholeDraft):
    """Drafts its current γ every round; a subclass's ``update`` may move γ between rounds."""

    def __init__(self, gamma: int):
        self.gamma = gamma

    def draft_length(self, evidence=None) -> int:
        return self.gamma


class Fixed(GammaSchedule):
    """Always γ drafts (Leviathan et al., Algorithm 1)."""

    kind = "fixed"

    def update(self, drafted, accepted, timing=None, draft_forwards=0) -> dict[str, Any]:
        return {"kind": self.kind, "gamma": self.gamma}


class Heuristic(GammaSchedule):
    """The Hugging Face assisted-generation schedule: +2 after a fully accepted round, −1 otherwise
    (never below 1), starting from γ."""

    kind = "heuristic"

    def update(self, drafted, accepted, timing=None, draft_forwards=0) -> dict[str, Any]:
        before = self.gamma
        if drafted > 0:
            grown = self.gamma + 2 if accepted == drafted else self.gamma - 1
            self.gamma = min(MAX_GAMMA, max(1, grown))
        return {"kind": self.kind, "gamma_before": before, "gamma_after": self.gamma}
