"""The round step shared by ``ar`` and ``speculative`` (Leviathan et al., Algorithm 1).

One round:
    1. draft   — the drafter proposes K = controller.draft_length(evidence) tokens (K = 0 for ``ar``)
    2. verify  — one target forward over the K drafts (plus the pending token) gives p for K + 1 positions
    3. accept  — greedy prefix match, or accept w.p. min(1, p/q) with a residual correction
    4. commit  — emit the accepted prefix + one target token; both KV caches roll back to the new context

``ar`` is the same step with no drafter, so both share the trace format; the round driver
(``rounds.run_rounds``) owns the clock, the token budget and the end-of-sequence cut. The target's cache always holds the committed context except its last token (the "pending" token, which the
next verification runs together with the drafts).

Shape legend: K drafted tokens, V vocabulary.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

import torch

from .acceptance import Verdict, greedy_accept, speculative_accept
from .cache import CachedForward
from .controllers import Controller
from .drafters import NO_PROPOSAL, Drafter, Proposal
from .forward import full_forward
from .rounds import TOP_ALTERNATIVES, Round, run_rounds, top_pairs
from .sampling import Rng, SamplingConfig, distribution
from ..trace import RoundTrace, Timing


def decode_rounds(target, drafter: Drafter | None, controller: Controller, cfg: SamplingConfig,
                  prompt_ids: list[int], max_new_tokens: int, rng: Rng,
                  lenience: float = 1.0) -> Iterator[tuple[RoundTrace, float]]:
    """Yield (round, seconds spent recording it) until ``max_new_tokens`` or an end-of-sequence token.
    ``lenience`` < 1: Appendix A.5's lossy accept rule (``acceptance``). ``target``: the model that scores each
    round; one with a ``forward`` of its own (a decoder step: a low-bit copy of the model) runs that."""
    step = SpeculativeStep(target, drafter, controller, cfg, rng, lenience)
    return run_rounds(target.device, target.eos_token_ids, step, prompt_ids, max_new_tokens)


class SpeculativeStep:
    """One round of Algorithm 1 (``ar`` when there is no drafter) on the round driver."""

    def __init__(self, target, drafter: Drafter | None, controller: Controller, cfg: SamplingConfig, rng: Rng,
                 lenience: float = 1.0):
        self.runner = getattr(drafter, "verifier", None) or CachedForward(
            getattr(target, "forward", None) or full_forward(target.model), target.device)
        self.drafter, self.controller, self.cfg, self.rng, self.lenience = drafter, controller, cfg, rng, lenience

    def __call__(self, round: Round):
        drafter, controller, cfg, rng, clock, context = (self.drafter, self.controller, self.cfg, self.rng,
                                                         round.clock, round.context)
        # 1. draft (leave room for the target's token so a round never passes max_new_tokens)
        k = 0 if drafter is None else min(controller.draft_length(_evidence(drafter, controller, context)),
                                          round.budget - 1)
        proposal = _through_end(drafter.propose(context, k, cfg, rng, controller) if k > 0 else NO_PROPOSAL, round)
        drafted = proposal.tokens
        drafted_at = clock()

        # 2. verify: logits for the position before each draft and after the last one
        logits = self.runner.logits(context + drafted, len(drafted) + 1)  # (K+1, V)
        p = distribution(logits, cfg)  # (K+1, V)
        verified_at = clock()
        draft_detail = drafter.verified() if drafted else None  # before the caches are cut

        # 3. accept
        if cfg.greedy:
            verdict = greedy_accept(logits.argmax(dim=-1).tolist(), drafted, p, self.lenience)
        else:
            verdict = speculative_accept(p, q_for(proposal, p), drafted, rng.on(p.device), self.lenience)

        # 4. commit: stop at an end-of-sequence token wherever it falls
        emitted, n_accepted = round.until_end(drafted[: verdict.n_accepted] + [verdict.next_token], verdict.n_accepted)
        context_len = round.commit(emitted)
        self.runner.truncate(len(context) - 1)
        if drafter is not None:
            drafter.rollback(context)
        controller_state = {}
        if drafter is not None:  # the controller learns from this round's outcome and its costs so far
            so_far = Timing(drafted_at - round.start, verified_at - drafted_at, clock() - verified_at)
            controller_state = controller.update(len(drafted), verdict.n_accepted, so_far, proposal.forwards)
        timing = Timing(drafted_at - round.start, verified_at - drafted_at, clock() - verified_at)
        # a lenient round says which of its accepts the exact rule would have refused
        detail = {"lenience": self.lenience, "lenient_accepts": list(verdict.lenient)} if self.lenience < 1 else {}
        detail.update(proposal.detail or {})

        def record() -> RoundTrace:
            detail.update(draft_detail() if draft_detail is not None else {})
            return _record(round.index, context_len, proposal, p, verdict, emitted, n_accepted, drafter is not None,
                           controller_state, timing, detail)
        return record


def _through_end(proposal: Proposal, round: Round) -> Proposal:
    """The draft cut after its first end-of-sequence token: the text would end there, so nothing after it
    is verified (or shown as tested and refused). Lossless: no accept decision up to the end depends on
    the drafts after it."""
    tokens, _ = round.until_end(proposal.tokens, 0)
    if len(tokens) == len(proposal.tokens):
        return proposal
    q = proposal.q[: len(tokens)] if proposal.q is not None else None
    return dataclasses.replace(proposal, tokens=tokens, q=q)


def _evidence(drafter: Drafter, controller: Controller, context: list[int]) -> str | None:
    """What the drafter says its next draft rests on (prompt lookup: the match), asked only for a controller
    that uses it: prompt lookup's search costs 0.1 ms at 300 context tokens, 0.4 ms at 1000."""
    return drafter.evidence(context) if getattr(controller, "uses_evidence", False) else None


def q_for(proposal: Proposal, p: torch.Tensor) -> torch.Tensor:
    """The draft distributions on the target's device; point masses for a deterministic draft."""
    if proposal.q is not None:
        return proposal.q.to(p.device)
    tokens = torch.tensor(proposal.tokens, dtype=torch.long, device=p.device)
    return torch.nn.functional.one_hot(tokens, p.shape[-1]).float()  # (K, V)


def _record(index: int, context_len: int, proposal: Proposal, p: torch.Tensor, verdict: Verdict,
            emitted: list[int], n_accepted: int, has_drafter: bool, controller_state: dict,
            timing: Timing, detail: dict) -> RoundTrace:
    """Plain-data record of one round (off the timed path; its cost is reported as ``record_s``)."""
    drafted = proposal.tokens
    k = len(drafted)
    positions = torch.arange(len(emitted), device=p.device)
    p_emitted = p[positions, torch.tensor(emitted, dtype=torch.long, device=p.device)].tolist()
    top_p = torch.topk(p, min(TOP_ALTERNATIVES, p.shape[-1]), dim=-1)
    if k:
        q = q_for(proposal, p)
        rows = torch.arange(k, device=p.device)
        index_t = torch.tensor(drafted, device=p.device)
        q_drafted = q[rows, index_t].tolist()
        p_drafted = p[rows, index_t].tolist()
        top_q = torch.topk(q, min(TOP_ALTERNATIVES, q.shape[-1]), dim=-1)
        draft_top = top_pairs(top_q)
        event = "all-accepted" if verdict.next_kind == "bonus" else "rejected"
    else:
        q_drafted = p_drafted = []
        draft_top = ()
        event = "no-draft" if has_drafter else "target"
    kinds = ["accepted"] * n_accepted
    if len(emitted) > n_accepted:
        kinds.append("target" if k == 0 else verdict.next_kind)
    residual_top = None
    if verdict.residual is not None:
        top_r = torch.topk(verdict.residual, min(TOP_ALTERNATIVES, p.shape[-1]))
        residual_top = tuple(zip(top_r.indices.tolist(), top_r.values.tolist()))
    return RoundTrace(
        index=index, context_len=context_len, drafted=tuple(drafted), q_drafted=tuple(q_drafted),
        p_drafted=tuple(p_drafted), n_accepted=n_accepted, emitted=tuple(emitted), emitted_kind=tuple(kinds),
        p_emitted=tuple(p_emitted), event=event, timing=timing,
        rejected_at=verdict.n_accepted if event == "rejected" else None,
        uniforms=verdict.uniforms, draft_top=draft_top, target_top=top_pairs(top_p), residual_top=residual_top,
        draft_forwards=proposal.forwards, target_forwards=1, controller=controller_state, detail=detail,
    )
