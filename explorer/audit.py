"""Is a run lossless? Two audits against the target model itself.

- ``greedy_audit``: a greedy run against plain (autoregressive) decoding on the same prompt: the first
  token where they differ, and the target's top-2 margin there in both runs. Greedy speculative decoding
  must reproduce plain decoding token for token (Leviathan et al. section 2.3); where a verification of
  several tokens computes the same logits in a different order, a near tie (a margin of a few 1e-6 in
  logits) can flip, and the margin tells that apart from a bug. Lossy methods show their divergence too.
- ``sampling_audit``: many seeded runs of the method; the first token's counts against the target's own
  warped distribution p, with Pearson's χ² test. The accept/resample rule makes that token distributed
  exactly as p (Theorem 3.5), whether it came from an accepted draft or from the residual.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

from .chi_square import MIN_EXPECTED, chi_square
from .errors import ExplorerError
from .limits import check_temperature
from .words import duration
from .quality import first_divergence, token_agreement

MIN_AUDIT_RUNS = 10
RECENT_RUNS = 16  # the runs whose median prices the rest of an audit (the machine's load moves)
MAX_AUDIT_RUNS = 2000
MAX_AUDIT_TOKENS = 400_000  # runs × prompt tokens: each run reads the prompt again (200 runs of a 2 000-token prompt)
POWER_TEMPERATURES = (0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0)  # tried, nearest first, when a first token is near-certain


# -- greedy: first divergence and the top-2 margin there ----------------------------------------------


@dataclass(frozen=True)
class GreedyAudit:
    """A greedy run against plain decoding. ``diverges_at`` is None when the outputs agree over
    ``compared`` tokens; otherwise the position (0-based), each run's token there and the target's
    top-2 logit margin log(p1/p2) at that position as plain decoding and as this run computed it."""

    compared: int
    agreement: float
    diverges_at: int | None = None
    ours: int | None = None
    theirs: int | None = None
    margin_plain: float | None = None
    margin_run: float | None = None


def target_top_at(trace, position: int):
    """The target's top alternatives ((id, prob), …) at output position ``position``, from the round
    that emitted it (emitted token j of a round was chosen from its target_top row j), or None."""
    start = 0
    for r in trace.rounds:
        if start <= position < start + len(r.emitted):
            row = position - start
            return r.target_top[row] if row < len(r.target_top) else None
        start += len(r.emitted)
    return None


def top2_margin(top) -> float | None:
    """log(p1 / p2) of a top list: the logit margin of the two likeliest tokens (greedy traces record the
    softmax at temperature 1, so the ratio of probabilities is the difference of logits)."""
    if not top or len(top) < 2 or top[1][1] <= 0 or top[0][1] <= 0:
        return None
    return math.log(top[0][1] / top[1][1])


def greedy_audit(trace, baseline) -> GreedyAudit | None:
    """None unless ``trace`` is greedy and ``baseline`` is the plain decoding of the same prompt."""
    if baseline is None or trace.settings.temperature != 0 or baseline.settings.temperature != 0:
        return None
    if list(trace.prompt_ids) != list(baseline.prompt_ids):
        return None
    output, reference = list(trace.output_ids), list(baseline.output_ids)
    compared = min(len(output), len(reference))
    at = first_divergence(output[:compared], reference[:compared])
    agreement = token_agreement(output, reference)
    if at is None:
        return GreedyAudit(compared=compared, agreement=agreement)
    return GreedyAudit(compared=compared, agreement=agreement, diverges_at=at, ours=output[at], theirs=reference[at],
                       margin_plain=top2_margin(target_top_at(baseline, at)),
                       margin_run=top2_margin(target_top_at(trace, at)))


# -- sampling: χ² of the first token against the target's distribution ---------------------------------


def check_audit_temperature(temperature) -> float:
    """The audit's temperature: the one rule every surface meets (``limits.check_temperature``), and above 0."""
    if check_temperature(temperature) == 0:
        raise ExplorerError("the sampling audit needs a temperature above 0 (greedy runs have the greedy audit)")
    return float(temperature)


@dataclass(frozen=True)
class SamplingAudit:
    """``runs`` seeded runs; ``bins`` [(label token ids or None for "other", observed, expected)];
    ``impossible``: draws of tokens the target gives probability 0; ``paths``: how the first token came
    to be (accepted draft, corrected, bonus, target) → runs."""

    runs: int
    temperature: float
    chi2: float
    dof: int
    p_value: float
    bins: tuple[tuple[int | None, int, float], ...]
    impossible: int
    paths: dict
    token_text: dict  # id → its text piece, for the binned tokens
    lossy: bool = False  # the method, with the options audited, may differ from the target (its runs say so)
    # With fewer than two bins χ² compares nothing and passes whatever the method does (#42: 20 runs, one first
    # token, "p = 1. Consistent"). Then: the target's probability of its likeliest first token, and what would
    # give the test something to compare: as many runs, or this temperature (None: none would, within reach).
    likeliest: float | None = None
    runs_for_power: int | None = None
    temperature_for_power: float | None = None
    # Priced in time (issue 51): the seconds a run took here (the median from the second run on: the first loads
    # what the method builds); where the runs asked for would have taken longer than the bound, how many were asked
    # and the pace they were priced at (an earlier audit's, or this one's second run)
    seconds_per_run: float | None = None
    asked: int | None = None
    priced_at: float | None = None

    def cut_words(self, bound_s: float) -> str | None:
        """Why fewer runs than asked were made, in one line (None when all were)."""
        if self.asked is None or self.priced_at is None:
            return None
        return (f"cut to {self.runs:,} runs: {self.asked:,} would take about {duration(self.asked * self.priced_at)} "
                f"here ({self.priced_at:.2g} s a run, measured), and a job may take at most {duration(bound_s)}")

    @property
    def powerless(self) -> bool:
        """Whether the χ² test had nothing to compare: every draw fell in one bin."""
        return len(self.bins) < 2


def sampling_audit(model, prompt: str | None = None, *, prompt_ids: list[int] | None = None, runs: int = 200,
                   temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                   progress: Callable[[int, int], None] | None = None, should_stop: Callable[[], bool] | None = None,
                   max_seconds: float | None = None, seconds_per_run: float | None = None,
                   **decode_options) -> SamplingAudit:
    """``runs`` decodes of two tokens with seeds ``seed`` … ``seed + runs − 1``; the first token's counts
    against the target's warped distribution at the prompt (Pearson's χ², ``chi_square``).

    ``max_seconds`` (the app's bound on a job): the runs are priced at ``seconds_per_run`` (measured here by an
    earlier audit of the same settings) before the first, else at the second run's time, and cut to the runs that
    fit (the result says so: ``asked``), or refused in one line where not even ``MIN_AUDIT_RUNS`` would.

    Two tokens, so that the first round drafts (a budget of one leaves no room for a draft) and the first
    token goes through the method's accept test or its residual. ``decode_options`` are ``explorer.stream``'s
    (method, draft, gamma, controller, the method's options)."""
    import torch

    from . import api
    from .engine.sampling import SamplingConfig, warp

    if not isinstance(runs, int) or isinstance(runs, bool) or not MIN_AUDIT_RUNS <= runs <= MAX_AUDIT_RUNS:
        raise ExplorerError(f"runs must be a whole number from {MIN_AUDIT_RUNS} to {MAX_AUDIT_RUNS}, got {runs!r}")
    temperature = check_audit_temperature(temperature)
    counts: dict[int, int] = {}
    paths: dict[str, int] = {}
    ids = prompt_ids
    asked, measured, priced_at = runs, [], None
    started = time.perf_counter()
    if max_seconds is not None and seconds_per_run:  # priced before the first run, at an earlier audit's pace
        runs, priced_at = _affordable(runs, 0, 0.0, seconds_per_run, max_seconds), seconds_per_run
    k = 0
    while k < runs:
        if should_stop is not None and should_stop():
            raise ExplorerError(f"sampling audit stopped after {k} of {runs} runs")
        start = time.perf_counter()
        trace = api.decode(model, prompt if ids is None else None, prompt_ids=ids, temperature=temperature,
                           top_k=top_k, top_p=top_p, max_new_tokens=2, seed=seed + k, **decode_options)
        if k:  # the first run loads and builds what the method needs: not the pace of the others
            measured.append(time.perf_counter() - start)
        ids = list(trace.prompt_ids)  # encode the prompt once
        if runs * len(ids) > MAX_AUDIT_TOKENS:  # every run reads the whole prompt again
            raise ExplorerError(f"{runs} runs of a {len(ids)}-token prompt would read {runs * len(ids):,} prompt tokens; at "
                                f"most {MAX_AUDIT_TOKENS:,}: fewer runs or a shorter prompt")
        first = trace.output_ids[0]
        counts[first] = counts.get(first, 0) + 1
        kind = trace.rounds[0].emitted_kind[0]
        paths[kind] = paths.get(kind, 0) + 1
        k += 1
        if max_seconds is not None and measured:  # priced again after every run, at the pace of the recent ones
            pace = statistics.median(measured[-RECENT_RUNS:])
            fit = _affordable(runs, k, time.perf_counter() - started, pace, max_seconds, refuse=len(measured) == 1)
            if fit < runs:
                runs, priced_at = fit, pace
        if progress is not None:
            progress(k, runs)
    target = api.load_cached(model, decode_options.get("device"), decode_options.get("dtype"))
    with torch.no_grad():
        logits = target.model(torch.tensor([ids], device=target.device)).logits[0, -1:]
    probs = _support(warp(logits, SamplingConfig(float(temperature), top_k, float(top_p)))[0])
    chi2, dof, p_value, bins, impossible = chi_square(counts, probs, runs)
    likeliest = max(probs.values())
    power = {}
    if len(bins) < 2:  # a test that cannot fail: say what would give it power
        needed = math.ceil(MIN_EXPECTED / (1 - likeliest)) if likeliest < 1 else None
        nearest = sorted((t for t in POWER_TEMPERATURES if t != temperature), key=lambda t: abs(math.log(t / temperature)))
        other = next((t for t in nearest if len(chi_square(
            {}, _support(warp(logits, SamplingConfig(t, top_k, float(top_p)))[0]), runs)[3]) >= 2), None)
        power = {"runs_for_power": needed if needed is not None and needed <= MAX_AUDIT_RUNS else None,
                 "temperature_for_power": other}
    pace = statistics.median(measured) if measured else seconds_per_run
    return SamplingAudit(runs=runs, temperature=float(temperature), chi2=chi2, dof=dof, p_value=p_value, bins=bins,
                         impossible=impossible, paths=paths, lossy=trace.settings.lossy,
                         token_text=target.token_texts([t for t, _, _ in bins if t is not None]), likeliest=likeliest,
                         seconds_per_run=pace, asked=asked if runs < asked else None,
                         priced_at=priced_at if runs < asked else None, **power)


def _affordable(runs: int, done: int, elapsed: float, seconds_per_run: float, max_seconds: float,
                refuse: bool = True) -> int:
    """How many of ``runs`` fit in ``max_seconds``, ``done`` of them run in ``elapsed`` seconds and the rest at
    ``seconds_per_run`` (never fewer than ``done`` nor ``MIN_AUDIT_RUNS``); where not even ``MIN_AUDIT_RUNS`` fit,
    ``ExplorerError`` naming the time (``refuse``: when first priced)."""
    fit = done + int(max(0.0, max_seconds - elapsed) // seconds_per_run)
    if fit >= runs:
        return runs
    if fit < MIN_AUDIT_RUNS and refuse:
        raise ExplorerError(f"the sampling audit would take about {duration(runs * seconds_per_run)} here ({runs:,} runs at "
                            f"{seconds_per_run:.2g} s a run, measured), and even {MIN_AUDIT_RUNS} runs would take more "
                            f"than the {duration(max_seconds)} a job may take: a shorter prompt or a quicker method")
    return max(fit, done, MIN_AUDIT_RUNS)


def _support(p) -> dict[int, float]:
    """token → probability of a warped distribution (1-D tensor), the tokens with p > 0."""
    import torch

    p = p.double().cpu()
    return {t: float(p[t]) for t in torch.nonzero(p > 0).flatten().tolist()}
