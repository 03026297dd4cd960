"""An engine's counts to an ``Acceptance``, checked: each count finite, whole and not negative, and the counts
consistent with drafts accepted as a prefix (``from_counts``); a source with only a mean acceptance length gets the
i.i.d. fit (``from_mean``). The counts are a stranger's (an upload on a public Space): a refusal is one
``ExplorerError`` line."""

from __future__ import annotations

import math

from ..errors import ExplorerError
from ..limits import MAX_GAMMA, clip
from .model import Acceptance, iid_alpha

MAX_DRAFTERS = 32  # engines/models told apart in one file
MAX_LABEL_CHARS = 80  # a label value as shown in a drafter's name
MAX_COUNT = 2**63  # counters past this are not counts of anything real
TOLERANCE = 0.5  # counters scraped at one instant agree exactly; half a token absorbs float formatting


def check_count(value, what: str) -> float:
    """A counter's value: finite, not negative, whole (counters print as 123.0). An integer is bounded before
    any float arithmetic: JSON gives a 4 000-digit one exactly, and turning it into a float overflows."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExplorerError(f"{what} must be a number, got {clip(value, 40)}")
    if isinstance(value, int) and not 0 <= value <= MAX_COUNT:
        shown = f"a number of {len(str(abs(value)))} digits" if abs(value) > 10**15 else str(value)
        raise ExplorerError(f"{what} must be a count from 0 to 2^63, got {shown}")
    if not math.isfinite(value) or value < 0 or value > MAX_COUNT:
        raise ExplorerError(f"{what} must be a finite count of at least 0, got {value:g}")
    if abs(value - round(value)) > 1e-6:
        raise ExplorerError(f"{what} must be a whole count, got {value:g}")
    return float(round(value))


def from_counts(name: str, engine: str, source: str, drafts, draft_tokens, accepted_tokens, per_position) -> Acceptance:
    """vLLM's counters: ``per_position[i]`` drafts had position i + 1 accepted. Checked for what the
    counters must satisfy when every draft is accepted as a prefix: counts fall with the position, no
    position beats the drafts, they add up to the accepted tokens, and accepted ≤ drafted ≤ drafts × K."""
    drafts = check_count(drafts, f"{name}: the number of drafts")
    per_position = [check_count(v, f"{name}: accepted at position {i + 1}") for i, v in enumerate(per_position)]
    accepted = (check_count(accepted_tokens, f"{name}: accepted tokens") if accepted_tokens is not None
                else sum(per_position))
    drafted = check_count(draft_tokens, f"{name}: draft tokens") if draft_tokens is not None else None
    if drafts == 0:
        raise ExplorerError(f"{name}: no drafts counted yet: send some requests with speculative decoding on, then "
                            "read the metrics again")
    if not per_position:
        raise ExplorerError(f"{name}: no per-position counts (vllm:spec_decode_num_accepted_tokens_per_pos)")
    if len(per_position) > MAX_GAMMA:
        raise ExplorerError(f"{name}: {len(per_position)} draft positions; at most {MAX_GAMMA} are read")
    if per_position[0] > drafts + TOLERANCE:
        raise ExplorerError(f"{name}: inconsistent counts: position 1 accepted {per_position[0]:.0f} times in "
                            f"{drafts:.0f} drafts")
    for i in range(1, len(per_position)):
        if per_position[i] > per_position[i - 1] + TOLERANCE:
            raise ExplorerError(f"{name}: inconsistent counts: position {i + 1} accepted more often "
                                f"({per_position[i]:.0f}) than position {i} ({per_position[i - 1]:.0f}), but a "
                                "draft is accepted as a prefix")
    if abs(sum(per_position) - accepted) > TOLERANCE:
        raise ExplorerError(f"{name}: inconsistent counts: the positions add up to {sum(per_position):.0f} accepted "
                            f"tokens, the total says {accepted:.0f} (were the counters read at different times?)")
    if drafted is not None and not accepted <= drafted + TOLERANCE <= drafts * len(per_position) + 2 * TOLERANCE:
        raise ExplorerError(f"{name}: inconsistent counts: {accepted:.0f} accepted of {drafted:.0f} drafted tokens "
                            f"in {drafts:.0f} drafts of at most {len(per_position)}")
    return Acceptance(name, engine, source, tuple(a / drafts for a in per_position), True, drafts, drafted, accepted)


def from_mean(name: str, engine: str, source: str, mean_length: float, positions: int, drafts=None,
              draft_tokens=None, accepted_tokens=None) -> Acceptance:
    """A source with only a mean acceptance length E over drafts of K = ``positions``: the i.i.d. fit."""
    if not isinstance(positions, int) or not 1 <= positions <= MAX_GAMMA:
        raise ExplorerError(f"{name}: the draft length must be a whole number from 1 to {MAX_GAMMA}, got "
                            f"{clip(positions, 20)}")
    if not math.isfinite(mean_length) or not 1 <= mean_length <= positions + 1 + 1e-6:
        raise ExplorerError(f"{name}: a mean acceptance length of {mean_length:g} is impossible with drafts of "
                            f"{positions} tokens (it lies from 1 to {positions + 1})")
    alpha = iid_alpha(mean_length, positions)
    return Acceptance(name, engine, source, tuple(alpha ** i for i in range(1, positions + 1)), False, drafts,
                      draft_tokens, accepted_tokens)
