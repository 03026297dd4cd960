"""The round driver every decoding method runs on.

A method is a *step*: a callable that decodes one round and returns how to record it. The driver owns
what every method shares, written once here:

    the clock        perf_counter after the device's queued work (honest GPU timings)
    the token budget each round may emit at most ``max_new_tokens`` minus what was emitted before
    the end          a round's tokens are cut after the first end-of-sequence token (``Round.until_end``),
                     and the run ends with it
    recording        the step's record is built off the timed path; its cost is ``record_s``

A step gets a ``Round`` (its index, the committed context, the budget and the clock), decodes, calls
``Round.commit`` with the tokens it emits (the context grows; the step then cuts its caches back to it),
and returns a zero-argument function that builds the round's ``RoundTrace``, or None when it worked but
has no round to show yet (beam search, whose rounds are its best beam's history: a round is shown once
every beam that can still win descends from it); the driver then yields None, a heartbeat where a
consumer may stop the run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from ..trace import RoundTrace

TOP_ALTERNATIVES = 5  # alternatives per position kept in a record (draft_top, target_top, residual_top)

Step = Callable[["Round"], Callable[[], RoundTrace] | None]


@dataclass
class Round:
    """One round as a step sees it."""

    index: int
    context: list[int]  # the committed context: prompt + every token emitted so far (the step extends it)
    budget: int  # tokens this round may emit at most (≥ 1)
    eos: frozenset[int]
    clock: Callable[[], float]
    start: float  # the clock when the round began

    def until_end(self, emitted: list[int], n_accepted: int) -> tuple[list[int], int]:
        """``emitted`` cut after its first end-of-sequence token and to the budget; the accepted count
        cut with it (a round never emits past the end of the text or past ``max_new_tokens``)."""
        for i, token in enumerate(emitted):
            if token in self.eos:
                emitted = emitted[: i + 1]
                break
        emitted = emitted[: self.budget]
        return emitted, min(n_accepted, len(emitted))

    def commit(self, emitted: list[int]) -> int:
        """Append the round's tokens to the context; returns the context length before them."""
        before = len(self.context)
        self.context.extend(emitted)
        return before


def run_rounds(device: torch.device, eos, step: Step, prompt_ids: list[int],
               max_new_tokens: int) -> Iterator[tuple[RoundTrace, float]]:
    """Yield (round, seconds spent recording it) until ``max_new_tokens`` tokens or an end-of-sequence
    token. ``step`` decodes one round (see the module docstring)."""
    clock = clock_for(device)
    eos = frozenset(eos)
    context = list(prompt_ids)
    produced = index = 0
    while produced < max_new_tokens:
        build_record = step(Round(index, context, max_new_tokens - produced, eos, clock, clock()))
        if build_record is None:  # the step worked but has no round to show yet (a search whose history settles
            yield None            # later): a heartbeat, where a consumer may stop it
            continue
        recording_from = clock()
        record = build_record()
        yield record, clock() - recording_from
        produced += len(record.emitted)
        index += 1
        if not record.emitted or record.emitted[-1] in eos:
            return


def top_pairs(top) -> tuple:
    """torch.topk output (rows × k) -> ((id, prob), ...) per row, as plain data."""
    return tuple(tuple(zip(ids, probs)) for ids, probs in zip(top.indices.tolist(), top.values.tolist()))


def clock_for(device: torch.device):
    """perf_counter, after the device has finished its queued work (honest GPU timings)."""
    if device.type == "cuda":
        def clock() -> float:
            torch.cuda.synchronize(device)
            return time.perf_counter()
        return clock
    return time.perf_counter
