"""Controllers that draft a length they set themselves, with nothing measured: a fixed γ (Leviathan et al.),
Hugging Face's heuristic schedule, and that schedule stopping where the draft is unsure (``confident``).
``WholeDraft``, the base every controller here and in ``priced`` builds on, never stops a draft early."""

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


class Confident(Heuristic):
    """Hugging Face's schedule, and a draft that also stops right after a token it is unsure of: one whose
    probability under the draft (its top probability; temperature 1 when greedy, ``sampling.distribution``) is
    below ``floor`` (llama.cpp's ``--draft-p-min``, IPEX-LLM's confidence threshold). Why: the target refuses
    mostly where the draft hesitates, and every token drafted after a refusal is thrown away. The unsure token
    is still drafted (its forward already ran) and the schedule still grows γ after a round accepted whole, so γ
    becomes a ceiling and the draft's own confidence ends each round."""

    kind = "confident"
    FLOOR = 0.1  # chosen by measurement (docs/measurements.md, "Confidence-aware drafting")

    def __init__(self, gamma: int, floor: float | None = None):
        super().__init__(gamma)
        self.floor = self.FLOOR if floor is None else floor
        self.unsure: float | None = None  # the top probability that stopped this round's draft, if one did

    def keep_drafting(self, step: int, q_row: torch.Tensor | None) -> bool:
        if q_row is None:  # a copied draft has no distribution: nothing to be unsure of
            return True
        top = float(q_row.max())
        if top < self.floor:
            self.unsure = top
            return False
        return True

    def update(self, drafted, accepted, timing=None, draft_forwards=0) -> dict[str, Any]:
        record = super().update(drafted, accepted, timing, draft_forwards)  # its kind: this class's
        if self.unsure is not None:  # the draft's top probability that stopped it, below the floor
            record |= {"unsure": round(self.unsure, 4), "floor": self.floor}
        self.unsure = None
        return record
