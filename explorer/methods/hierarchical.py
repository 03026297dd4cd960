"""``hierarchical``: hierarchical speculative decoding (the reproduction report's Algorithm 3; Leviathan et al.,
section 7): the draft is itself sped up by a smaller draft, every level verified by speculative sampling.

A draft chain is written smallest first, ``>`` reading "drafts for": ``prompt-lookup:3>early-exit:4`` means
prompt lookup drafts for the early exit, whose tokens the target verifies; ``early-exit:4>early-exit:12``
puts the 4-layer exit under the 12-layer one; up to ``MAX_LEVELS`` drafts. To give the target K tokens, the
draft of level i runs inner rounds: level i+1 drafts up to ``inner_gamma`` tokens, level i scores them all in
one forward, accepts a prefix and adds its own correction or bonus token (Algorithm 1 at that level), until
K tokens stand. Each level's tokens are then distributed exactly as that level's own model would sample
them, and the rows it scored are the q the level above verifies against, so the target's output is the
target's (lossless: greedy identical to ``ar``; χ² in the tests).

The round records, per inner round, what the level below drafted, how many the level accepted, its own
next token and how it came (``inner_rounds``), and the forwards and seconds of every level
(``level_forwards``, ``level_seconds``, smallest first: a level's seconds are its proposals' or its forwards'
and accept tests', so the theory view can price each level). ``draft_forwards`` counts the tokens the chain
drafted, so the run's c is the chain's cost per drafted token against a target forward: the c of Theorem 3.8 for
a composite draft.
"""

from __future__ import annotations

import dataclasses
import math
import time

import torch

from ..drafts import make_drafter
from ..engine.acceptance import greedy_accept, speculative_accept
from ..engine.drafters import KEEP_DRAFTING, NO_PROPOSAL, Drafter, Proposal
from ..engine.sampling import distribution
from ..engine.speculative import q_for
from ..errors import ExplorerError
from ..limits import MAX_GAMMA, clip
from ..untrusted import Refused
from . import Method, Options, Request, option, register
from .speculative import run_speculative

MAX_LEVELS = 3  # drafts in one chain (four models with the target): each level multiplies the bookkeeping
PRESET = {"draft": "prompt-lookup:3>int4", "controller": "heuristic", "gamma": 8,
          "why": "A hierarchical draft is a chain, smallest first: prompt lookup proposes for the target's own 4-bit "
                 "copy, which drafts for the target. Measured on this CPU 3-7 % ahead of quantized's preset (the copy "
                 "drafting by itself), with quantized's schedule (heuristic from γ = 8) and 2 proposals an inner "
                 "round (1 as fast, 4 slower)."}


@dataclasses.dataclass(frozen=True)
class HierarchicalOptions(Options):
    title = "Hierarchical drafts: a draft drafted by a smaller draft"

    inner_gamma: int = option(2, "tokens the smaller draft proposes per inner round, for the draft above it to verify",
                              paper="004 Algorithm 3", symbol="γ_inner", low=1, high=MAX_GAMMA,
                              label="γ inner: drafts per inner round", slider=(1, 16, 1))


class HierarchicalDrafter(Drafter):
    """``upper`` (a draft that scores several positions in one forward) drafting with ``lower``'s help."""

    def __init__(self, lower: Drafter, upper: Drafter, inner_gamma: int):
        self.lower, self.upper, self.inner_gamma = lower, upper, inner_gamma
        self.runner = upper.runner
        self.spec = f"{lower.spec}>{upper.spec}"
        # the chain first: a summary shows a draft's first clause and folds the rest (how each level runs) away
        self.about = f"{lower.spec} proposing {inner_gamma} tokens an inner round to {upper.about}"
        self.levels = (lower.levels if isinstance(lower, HierarchicalDrafter) else [lower.spec]) + [upper.spec]

    def propose(self, context, k, cfg, rng, stop) -> Proposal:
        sequence, tokens, rows, inner_rounds = list(context), [], [], []
        lower_forwards = [0] * (len(self.levels) - 1)
        lower_seconds = [0.0] * (len(self.levels) - 1)
        upper_seconds = 0.0
        upper_before = self.runner.forwards
        while len(tokens) < k:
            # leave room for this level's own token: an inner round never passes k
            began = time.perf_counter()
            proposal = self._lower_proposal(sequence, min(self.inner_gamma, k - len(tokens) - 1), cfg, rng)
            proposed = time.perf_counter()
            drafted = proposal.tokens
            lower_forwards = [a + b for a, b in zip(lower_forwards, _level_forwards(proposal, len(lower_forwards)))]
            lower_seconds = [a + b for a, b in zip(lower_seconds,
                                                   _level_seconds(proposal, len(lower_seconds), proposed - began))]
            logits = self.runner.logits(sequence + drafted, len(drafted) + 1)  # (K'+1, V)
            q = distribution(logits, cfg)  # (K'+1, V): this level's distributions, the q the level above reads
            if cfg.greedy:
                verdict = greedy_accept(logits.argmax(dim=-1).tolist(), drafted)
            else:
                verdict = speculative_accept(q, q_for(proposal, q), drafted, rng.on(q.device))
            new = drafted[: verdict.n_accepted] + [verdict.next_token]
            upper_seconds += time.perf_counter() - proposed  # this level's forward and its accept test
            inner_rounds.append({"drafted": list(drafted), "accepted": verdict.n_accepted, "next": verdict.next_token,
                                 "kind": verdict.next_kind if drafted else "own"})
            stopped = False
            for token, row in zip(new, q):
                tokens.append(token)
                rows.append(row)
                sequence.append(token)
                if not stop.keep_drafting(len(tokens) - 1, row):
                    stopped = True
                    break
            self.lower.rollback(sequence)
            if stopped:
                break
        forwards = lower_forwards + [self.runner.forwards - upper_before]
        detail = {"levels": list(self.levels), "inner_gamma": self.inner_gamma, "inner_rounds": inner_rounds,
                  "level_forwards": forwards, "level_seconds": [round(x, 6) for x in lower_seconds + [upper_seconds]]}
        # draft_forwards: the drafted tokens, so that c is the chain's cost per drafted token
        return Proposal(tokens, torch.stack(rows) if rows else None, len(tokens), detail)

    def _lower_proposal(self, sequence, k, cfg, rng) -> Proposal:
        return self.lower.propose(sequence, k, cfg, rng, KEEP_DRAFTING) if k > 0 else NO_PROPOSAL

    def rollback(self, context: list[int]) -> None:
        self.upper.rollback(context)
        self.lower.rollback(context)


def _level_forwards(proposal: Proposal, levels: int) -> list[int]:
    """Forwards per level below: a nested chain's own count, else the one drafter's."""
    inner = (proposal.detail or {}).get("level_forwards")
    return list(inner) if inner is not None else [proposal.forwards] + [0] * (levels - 1)


def _level_seconds(proposal: Proposal, levels: int, elapsed: float) -> list[float]:
    """Seconds per level below: a nested chain's own clocks, else the whole proposal's time."""
    inner = (proposal.detail or {}).get("level_seconds")
    return list(inner) if inner is not None else [elapsed] + [0.0] * (levels - 1)


def make_chain(spec, target, load, inner_gamma: int) -> HierarchicalDrafter:
    """A draft chain ``A>B[>C]`` (smallest first) as nested ``HierarchicalDrafter``s."""
    if not isinstance(spec, str) or ">" not in spec:
        raise ExplorerError(f"hierarchical needs a chain of drafts, smallest first, e.g. prompt-lookup:3>early-exit:4; "
                            f"got {clip(spec, 60)}")
    parts = [part.strip() for part in spec.split(">")]
    if len(parts) > MAX_LEVELS or any(not part for part in parts):
        raise ExplorerError(f"bad draft chain {clip(spec, 60)}: 2 to {MAX_LEVELS} drafts joined by '>', smallest first")
    drafter = make_drafter(parts[0], target, load, "a hierarchical chain")
    for part in parts[1:]:
        upper = make_drafter(part, target, load, "a hierarchical chain")
        if not upper.gives_distributions:
            raise ExplorerError(f"{part} cannot verify a smaller draft (it has no model to score with): "
                                "the levels above the first must be model:<name> or early-exit:N")
        drafter = HierarchicalDrafter(drafter, upper, inner_gamma)
    return drafter


def start(request: Request, options: HierarchicalOptions):
    drafter = make_chain(request.draft, request.target, request.load, options.inner_gamma)
    return run_speculative(request, drafter, "hierarchical")


def check_round(data: dict, path: str) -> None:
    """A loaded round's hierarchical detail: the fields its view reads, of their kinds."""
    detail = data.get("detail", {})
    inner = detail.get("inner_rounds")
    if inner is None:
        return
    if not isinstance(inner, list) or len(inner) > MAX_GAMMA:
        raise Refused(f"{path}.detail.inner_rounds must be a list of at most {MAX_GAMMA} inner rounds")
    for i, r in enumerate(inner):
        where = f"{path}.detail.inner_rounds[{i}]"
        if not isinstance(r, dict):
            raise Refused(f"{where} must be an object")
        drafted, accepted, nxt = r.get("drafted"), r.get("accepted"), r.get("next")
        if not isinstance(drafted, list) or len(drafted) > MAX_GAMMA or not all(_is_id(t) for t in drafted):
            raise Refused(f"{where}.drafted must be a list of at most {MAX_GAMMA} token ids")
        if not _is_whole(accepted) or accepted > len(drafted):
            raise Refused(f"{where}.accepted must be a whole number up to the drafts it tested")
        if not _is_id(nxt):
            raise Refused(f"{where}.next must be a token id")
    levels, forwards = detail.get("levels"), detail.get("level_forwards")
    if not (isinstance(levels, list) and 2 <= len(levels) <= MAX_LEVELS and all(isinstance(x, str) for x in levels)):
        raise Refused(f"{path}.detail.levels must name 2 to {MAX_LEVELS} drafts")
    if not (isinstance(forwards, list) and len(forwards) == len(levels) and all(_is_whole(f) for f in forwards)):
        raise Refused(f"{path}.detail.level_forwards must hold one whole number per level")
    seconds = detail.get("level_seconds")  # traces before 2026-11-28 have none
    if seconds is not None and not (isinstance(seconds, list) and len(seconds) == len(levels) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and 0 <= x < 1e6
            for x in seconds)):
        raise Refused(f"{path}.detail.level_seconds must hold one finite, non-negative number of seconds per level")


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


def _is_id(value) -> bool:
    return _is_whole(value)


def round_tokens(r) -> list[int]:
    """The ids of a round's inner rounds (what each level below drafted, and each level's own token)."""
    return [t for inner in r.detail.get("inner_rounds", ()) for t in [*inner["drafted"], inner["next"]]]


register(Method(
    name="hierarchical",
    paper="Tulsian et al. (004), Algorithm 3",
    summary="hierarchical speculative decoding (004 Algorithm 3): the draft is itself drafted by a smaller draft, "
            "each level verified losslessly; draft chain smallest first, e.g. prompt-lookup:3>int4 (its preset)",
    lossy=False,
    options=HierarchicalOptions,
    start=start,
    check_round=check_round,
    round_tokens=round_tokens,
    glossary="hierarchical drafts (004, Algorithm 3): a **draft chain** written smallest first, "
             "prompt-lookup:3>int4, where each draft is itself drafted by the one before it (**γ_inner** "
             "tokens per inner round) and every level verifies the level below exactly; lossless.",
    drafts=("chain",),
    default_draft=PRESET["draft"],
    preset=lambda target: dict(PRESET),
    draft_words="A hierarchical draft is a chain, smallest first, e.g. prompt-lookup:3>int4 (prompt lookup "
                "proposes for the target's 4-bit copy, the copy drafts for the target).",
))
