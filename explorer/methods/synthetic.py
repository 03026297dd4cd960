"""``synthetic``: the theory lab's draft. Speculative sampling (Leviathan et al., Algorithm 1) with a draft
whose acceptance rate α and cost c are dials, so that the assumptions of Theorem 3.8 hold by construction:

    each drafted token is the target's own next token with probability α, independently (else another
    token, which the target refuses): the acceptances are i.i.d. Bernoulli(α), the paper's section 3.1
    every draft step costs c × T(1), T(1) the target's measured one-token forward on this machine, spent
    spinning on the clock (a busy wait, like a draft model that keeps the CPU busy; a sleep would hand the
    cores to nothing and wakes up late by ≈ 0.1 ms)

What the target would say is its own greedy output, decoded once before the run (cached per model and
prompt; not timed), so the lab needs greedy decoding. The verification is the exact one: the output is
the target's (lossless). Measured tokens per round and speed-up against eq. 1 and Theorem 3.8 — and the
same theorem priced with the measured T(γ+1)/T(1) — is ``python -m explorer sweep theory``.
"""

from __future__ import annotations

import dataclasses
import random
import time
import weakref
from collections import OrderedDict

import torch

from ..engine.cache import CachedForward
from ..engine.costs import step_time
from ..engine.drafters import NO_PROPOSAL, Drafter, Proposal
from ..engine.forward import full_forward
from ..errors import ExplorerError
from . import Method, Options, Request, option, register
from .speculative import run_speculative

ORACLES_PER_MODEL = 16  # greedy outputs kept per model (prompt → ids); a sweep reuses each prompt's


@dataclasses.dataclass(frozen=True)
class SyntheticOptions(Options):
    prefix = "synthetic_"
    title = "Theory lab: a synthetic draft with a dialled α and c"

    alpha: float = option(0.8, "the probability that each drafted token is the target's own (independently)",
                          paper="Leviathan et al. 3.1, α", symbol="α", low=0.0, high=1.0, slider=(0, 1, 0.05),
                          label="α: chance a draft is right")
    cost: float = option(0.1, "the cost of one draft step as a fraction of the target's one-token forward T(1)",
                         paper="Leviathan et al. 3.1, c", symbol="c", low=0.0, high=2.0, slider=(0, 1, 0.05),
                         label="c: draft step / target step")


class SyntheticDrafter(Drafter):
    """Proposes ``oracle``'s next tokens (the target's greedy output), each right with probability α,
    and spends ``step_s`` seconds per step."""

    def __init__(self, oracle: list[int], alpha: float, step_s: float, vocab_size: int, seed: int | str, spec: str):
        self.oracle, self.alpha, self.step_s, self.vocab_size = oracle, alpha, step_s, vocab_size
        self.random = random.Random(seed)  # its own stream: the run's generator stays the target's
        self.spec = spec
        self.about = (f"{spec}: each drafted token is the target's own with probability {alpha:g}, else another; "
                      f"{step_s * 1e3:.1f} ms per step")

    def propose(self, context, k, cfg, rng, stop) -> Proposal:
        start = len(context)
        if self.oracle[:start] != context:  # off the target's greedy path (cannot happen when lossless)
            return NO_PROPOSAL
        tokens = []
        for step, truth in enumerate(self.oracle[start: start + k]):
            spin(self.step_s)
            right = self.random.random() < self.alpha
            tokens.append(truth if right else (truth + 1 + self.random.randrange(self.vocab_size - 1)) % self.vocab_size)
            if not stop.keep_drafting(step, None):
                break
        return Proposal(tokens, None, len(tokens))


def spin(seconds: float) -> None:
    """Keep the CPU busy for ``seconds`` (measured on the same clock as the rounds)."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


_ORACLES: "weakref.WeakKeyDictionary[torch.nn.Module, OrderedDict]" = weakref.WeakKeyDictionary()


def greedy_output(target, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    """prompt + the target's greedy continuation (to its end-of-sequence token or ``max_new_tokens``),
    one token per forward like ``ar``; cached per model and prompt."""
    kept = _ORACLES.setdefault(target.model, OrderedDict())
    key = tuple(prompt_ids)
    ids = kept.get(key)
    if ids is None or (len(ids) - len(key) < max_new_tokens and ids[-1] not in target.eos_token_ids):
        runner = CachedForward(full_forward(target.model), target.device)
        ids = list(prompt_ids)
        while len(ids) - len(key) < max_new_tokens and (len(ids) == len(key) or ids[-1] not in target.eos_token_ids):
            ids.append(int(runner.logits(ids, 1)[0].argmax()))
        kept[key] = ids
    kept.move_to_end(key)
    while len(kept) > ORACLES_PER_MODEL:
        kept.popitem(last=False)
    return ids


def start(request: Request, options: SyntheticOptions):
    if not request.sampling.greedy:
        raise ExplorerError("the synthetic draft proposes the target's greedy tokens: set temperature 0")
    target, s = request.target, request.settings
    oracle = greedy_output(target, request.prompt_ids, s.max_new_tokens)
    one_step = step_time(target)  # T(1), seconds: an uncontended one, measured once per model
    spec = f"synthetic:α={options.alpha:g}:c={options.cost:g}"
    # seeded by the run's seed and its prompt: one seed over many prompts still draws fresh acceptances
    seed = f"{s.seed}:{','.join(map(str, request.prompt_ids))}"
    drafter = SyntheticDrafter(oracle, options.alpha, options.cost * one_step, target.vocab_size, seed, spec)
    return run_speculative(request, drafter, "synthetic")


register(Method(
    name="synthetic",
    paper="Leviathan et al. 2023, Theorem 3.8",
    summary="the theory lab: speculative sampling with a synthetic draft that is right with probability α and "
            "costs c target steps, Theorem 3.8's assumptions by construction (greedy)",
    lossy=False,
    options=SyntheticOptions,
    start=start,
    draft="none",
    glossary="the theory lab's draft: it proposes the target's own greedy token with probability **α** and costs "
             "**c** target steps, so Theorem 3.8's assumptions hold by construction and the measured speed-up can be "
             "set beside the formula.",
    draft_words="the synthetic draft of the options below (α and c): no drafter",
))
