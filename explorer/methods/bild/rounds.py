"""BiLD, the Big Little Decoder (Kim et al.; sections 3.3–3.5, Algorithm 1): lossy by design.

The small model (any drafter with distributions: ``model:<name>``, ``early-exit:N``) runs
autoregressively. One round:

    1. small turn  — draft until the small model is unsure, max_y p_S(y) < α_FB (the *fallback*: that
                     token is not used), or until ``max_small_steps`` tokens (the paper caps it at 10)
    2. large pass  — the large model runs all pending small tokens in one non-autoregressive pass,
                     giving p_L at every pending position and the next one
    3. rollback    — the smallest m with d(p_S, p_L) = −log p_L(y_m) > α_RB (the cross-entropy of the
                     small model's hard label under the large model's soft label, eq. 3 / section 4.2) at
                     which the large model would choose another token: keep y_<m, emit the large model's
                     y_m, flush the rest; without one, keep every small token and add the large model's next
    4. commit      — both KV caches are cut back to the committed context

α_RB → 0 reproduces the large model's greedy output; no fallback and no rollback (α_FB = 0, α_RB = ∞,
enough small steps) reproduces the small model's. Greedy or sampled (sampling from p_S / p_L, as the
paper's Algorithm 1 does).

Shape legend: K small tokens in a turn, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import torch

from ...engine.cache import CachedForward
from ...engine.drafters import ForwardDrafter
from ...engine.forward import full_forward
from ...engine.rounds import TOP_ALTERNATIVES, Round, run_rounds, top_pairs
from ...engine.sampling import Rng, SamplingConfig, choose, distribution
from ...trace import RoundTrace, Timing


@dataclass(frozen=True)
class BildConfig:
    """α_FB in [0, 1] (0: never fall back), α_RB ≥ 0 in nats (None or ∞: never roll back), the cap on a
    small turn. Defaults, ranges and their checks: ``explorer.methods.bild.BildOptions``."""

    fallback_threshold: float
    rollback_threshold: float | None
    max_small_steps: int

    @property
    def rolls_back(self) -> bool:
        return self.rollback_threshold is not None and math.isfinite(self.rollback_threshold)


class Fallback:
    """BiLD's fallback policy (section 3.3), a stop rule for the small turn: stop at the first token whose
    max p_S is below α_FB."""

    def __init__(self, threshold: float):
        self.threshold = threshold
        self.unsure_prob: float | None = None  # max p_S of the token that triggered the fallback
        self.last_max: float | None = None

    def keep_drafting(self, step: int, q_row: torch.Tensor) -> bool:
        self.last_max = float(q_row.max())
        if self.last_max < self.threshold:
            self.unsure_prob = self.last_max
            return False
        return True


def bild_rounds(target, small: ForwardDrafter, cfg: BildConfig, sampling: SamplingConfig,
                prompt_ids: list[int], max_new_tokens: int, rng: Rng) -> Iterator[tuple[RoundTrace, float]]:
    """Yield (round, seconds spent recording it) until ``max_new_tokens`` or an end-of-sequence token."""
    step = BildStep(target, small, cfg, sampling, rng)
    return run_rounds(target.device, target.eos_token_ids, step, prompt_ids, max_new_tokens)


class BildStep:
    """One BiLD round (small turn, large pass, rollback, commit) on the round driver."""

    def __init__(self, target, small: ForwardDrafter, cfg: BildConfig, sampling: SamplingConfig, rng: Rng):
        self.large = CachedForward(full_forward(target.model), target.device)
        self.small, self.cfg, self.sampling, self.rng = small, cfg, sampling, rng

    def __call__(self, round: Round):
        small, cfg, sampling, rng, clock, context = (self.small, self.cfg, self.sampling, self.rng, round.clock,
                                                     round.context)
        # 1. small turn (room for all the remaining tokens: without a fallback the small model may finish)
        policy = Fallback(cfg.fallback_threshold)
        proposal = small.propose(context, min(cfg.max_small_steps, round.budget), sampling, rng, policy)
        tokens, q = proposal.tokens, proposal.q
        if policy.unsure_prob is not None:  # the unsure token is not used: the large model decides there
            tokens, q = tokens[:-1], q[:-1]
        tokens, _ = round.until_end(tokens, 0)  # the small model ended the text: the turn ends there
        q = q[: len(tokens)] if q is not None else None
        finished = len(tokens) == round.budget or bool(tokens and tokens[-1] in round.eos)
        small_at = clock()

        # 2. large pass over the pending small tokens: p_L for each of them and for the next position
        #    (a finished text needs the pass only to review the small tokens for a rollback)
        p = None
        if not finished or cfg.rolls_back:
            p = distribution(self.large.logits(context + tokens, len(tokens) + 1), sampling)  # (K+1, V)
        large_at = clock()

        # 3. rollback: the first position the large model rejects and would fill differently
        rollback = None
        if p is not None and cfg.rolls_back:
            rows = torch.arange(len(tokens), device=p.device)
            distance = -torch.log(p[rows, torch.tensor(tokens, dtype=torch.long, device=p.device)].clamp_min(1e-30))
            for m in (distance > cfg.rollback_threshold).nonzero().flatten().tolist():
                replacement = choose(p[m], sampling, rng.on(p.device))
                if replacement != tokens[m]:
                    rollback = {"position": m, "distance": float(distance[m]), "replaced": tokens[m],
                                "replacement": replacement, "flushed": len(tokens) - m}
                    break
        if rollback is not None:
            kept = rollback["position"]
            emitted = tokens[:kept] + [rollback["replacement"]]
            kinds = ["accepted"] * kept + ["corrected"]
        elif finished:
            kept, emitted, kinds = len(tokens), list(tokens), ["accepted"] * len(tokens)
        else:
            kept = len(tokens)
            emitted = tokens + [choose(p[len(tokens)], sampling, rng.on(p.device))]
            kinds = ["accepted"] * kept + ["bonus"]
        emitted, kept = round.until_end(emitted, kept)
        kinds = kinds[: len(emitted)]

        # 4. commit
        context_len = round.commit(emitted)
        self.large.truncate(len(context) - 1)
        small.rollback(context)
        done_at = clock()

        reason = "confidence" if policy.unsure_prob is not None else ("end" if finished else "cap")
        detail = {
            "reason": reason, "small_max_prob": policy.unsure_prob if policy.unsure_prob is not None else policy.last_max,
            "fallback_threshold": cfg.fallback_threshold, "rollback_threshold": cfg.rollback_threshold,
            "rollback": rollback, "large_pass": p is not None,
        }
        timing = Timing(small_at - round.start, large_at - small_at, done_at - large_at)
        return lambda: _record(round.index, context_len, tokens, q, p, emitted, kinds, kept, detail,
                               proposal.forwards, timing)


def _record(index, context_len, tokens, q, p, emitted, kinds, kept, detail, small_forwards, timing) -> RoundTrace:
    """Plain-data record of one BiLD round (off the timed path)."""
    k = len(tokens)
    ids = torch.tensor(tokens, dtype=torch.long)
    q_drafted = q[torch.arange(k, device=q.device), ids.to(q.device)].tolist() if k else []
    draft_top = top_pairs(torch.topk(q, min(TOP_ALTERNATIVES, q.shape[-1]), dim=-1)) if k else ()
    if p is not None:
        p_drafted = p[torch.arange(k, device=p.device), ids.to(p.device)].tolist() if k else []
        p_emitted = p[torch.arange(len(emitted), device=p.device),
                      torch.tensor(emitted, dtype=torch.long, device=p.device)].tolist()
        target_top = top_pairs(torch.topk(p, min(TOP_ALTERNATIVES, p.shape[-1]), dim=-1))
    else:  # the small model finished the text and no rollback check was asked for
        p_drafted, p_emitted, target_top = [0.0] * k, [0.0] * len(emitted), ()
    return RoundTrace(
        index=index, context_len=context_len, drafted=tuple(tokens), q_drafted=tuple(q_drafted),
        p_drafted=tuple(p_drafted), n_accepted=kept, emitted=tuple(emitted), emitted_kind=tuple(kinds),
        p_emitted=tuple(p_emitted), event="rollback" if detail["rollback"] else "fallback", timing=timing,
        rejected_at=detail["rollback"]["position"] if detail["rollback"] else None, draft_top=draft_top,
        target_top=target_top, draft_forwards=small_forwards, target_forwards=int(detail["large_pass"]),
        detail=detail,
    )
