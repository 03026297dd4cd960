"""Drafters: propose up to k tokens, with their draft distributions q when they have them.

``Drafter`` is the contract: every capability the round loop, the controllers and the page use, each
declared here with its default. Two kinds of drafter: ``ForwardDrafter`` drafts with a forward function
(a small model, or the target's first layers with an exit head: EESD 3.1) and ``PromptLookupDrafter``
copies from the context (Leviathan et al. 3.6; deterministic, so q is a point mass). Draft specs
(``model:<name>``, ``early-exit:N``, ``prompt-lookup:n``) are read by ``explorer.drafts``.

Shape legend: K drafted tokens, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from .cache import CachedForward, common_prefix
from .sampling import Rng, SamplingConfig, choose, distribution


@dataclass(frozen=True)
class Proposal:
    """Drafted ids and, for a model draft, their distributions q (K, V); None means point masses.
    ``detail``: what the draft did inside, recorded in the round's ``detail`` (a hierarchical draft's
    inner rounds), plain JSON data."""

    tokens: list[int]
    q: torch.Tensor | None = None
    forwards: int = 0
    detail: dict | None = None


NO_PROPOSAL = Proposal([])


class StopRule(Protocol):
    """Stops a draft early: asked after each drafted token (``q_row``: its distribution, None for a
    copied draft). Controllers are stop rules (EESD's Thompson sampling); so is BiLD's fallback."""

    def keep_drafting(self, step: int, q_row: torch.Tensor | None) -> bool: ...


class KeepDrafting:
    """The stop rule that never stops: a draft asked for k tokens drafts k (an inner level of a draft
    chain, a beam's draft), only the outermost level answering to a controller."""

    def keep_drafting(self, step, q_row) -> bool:
        return True


KEEP_DRAFTING = KeepDrafting()


class Drafter:
    """What a draft is to the rest of the engine. Subclasses implement ``propose``; the rest defaults to
    "not available" and a subclass sets what it has."""

    spec: str = ""  # how it was asked for, e.g. "early-exit:4"
    about: str = ""  # one line for people: which draft this is (trained or not, from where)
    verifier = None  # a target runner that shares this draft's computation (early exit), else None
    expected_acceptance: float | None = None  # acceptance measured offline (a trained exit's agreement)
    theta_model = None  # (step, q_row) -> θ_M, the trained acceptance predictor of EESD eq. 5, else None
    runner = None  # scores several positions in one forward (logits/truncate/forwards): a draft that can
    #                verify a smaller draft (hierarchical); None for a draft with no model (prompt lookup)
    row_scorer = None  # () -> a new ``engine.trie_cache.TrieCache`` over this draft's own forward: several
    #                    sequences' log-probabilities in one forward (beam search's draft beams); None: one
    #                    sequence at a time through ``runner``
    needs_round_verifier = False  # drafts only from what its ``verifier`` computed as the round loop's target
    #                               runner (the feature head reads the target's features there)

    @property
    def gives_distributions(self) -> bool:
        """Whether it gives q for every drafted token from a forward of its own, its ``runner`` (what BiLD's small
        model, beam search's exact rule and a draft chain's upper levels need); ``DraftKind.gives_distributions``
        says it of a kind before one is built. The one name of this capability."""
        return self.runner is not None

    def propose(self, context: list[int], k: int, cfg: SamplingConfig, rng: Rng, stop: StopRule) -> Proposal:
        """Up to ``k`` tokens that continue ``context``, asking ``stop`` after each."""
        raise NotImplementedError

    def verified(self):
        """Called right after the target scored the latest draft, before any cache is cut: a zero-argument
        function building what the draft records in the round's ``detail`` (run off the timed path), or
        None. The feature head records how close its predicted features came to the target's."""
        return None

    def rollback(self, context: list[int]) -> None:
        """Drop whatever was cached past the committed ``context`` (nothing to do for a stateless draft)."""

    def evidence(self, context: list[int]) -> str | None:
        """What the next draft would rest on, said cheaply before drafting (prompt lookup: its match), for
        controllers that learn acceptance per kind of evidence (``cost-aware``); None: nothing to say."""
        return None


class ForwardDrafter(Drafter):
    """Drafts autoregressively with any forward function that has its own KV cache.

    Each step runs one token (the cache keeps everything before), draws from q with the run's sampling
    warp, and asks the stop rule whether to go on.
    """

    def __init__(self, spec: str, forward=None, device: torch.device | None = None, runner=None, verifier=None,
                 about: str | None = None, expected_acceptance: float | None = None, theta_model=None,
                 row_scorer=None):
        self.spec = spec
        self.row_scorer = row_scorer
        self.runner = runner if runner is not None else CachedForward(forward, device)
        self.verifier = verifier
        self.about = about or spec
        self.expected_acceptance = expected_acceptance
        self.theta_model = theta_model

    def propose(self, context, k, cfg, rng, stop) -> Proposal:
        sequence = list(context)
        tokens, rows = [], []
        before = self.runner.forwards
        for step in range(k):
            q_row = distribution(self.runner.logits(sequence, 1), cfg)[0]  # (V,)
            token = choose(q_row, cfg, rng.on(q_row.device))
            tokens.append(token)
            rows.append(q_row)
            sequence.append(token)
            if not stop.keep_drafting(step, q_row):
                break
        q = torch.stack(rows) if rows else None  # (K, V)
        return Proposal(tokens, q, self.runner.forwards - before)

    def rollback(self, context: list[int]) -> None:
        self.runner.truncate(common_prefix(self.runner.ids, context))


@dataclass(frozen=True)
class ChatFrame:
    """The chat template's own tokens around a user's message: ``before`` it (the system turn, the user's header)
    and ``after`` it (the end of the turn, the assistant's header). A draft that copies from the context must not
    copy these: round 1 of the page's default example drafted ``<|im_start|>ass istant ↵`` — the template's
    assistant header, copied from the prompt — which the target refuses (#48)."""

    before: tuple[int, ...]
    after: tuple[int, ...]

    @classmethod
    def of(cls, encode_chat) -> "ChatFrame | None":
        """From ``encode_chat`` (a message's text → the prompt ids the model is given): the tokens two different
        messages share at the start and at the end. None where messages are not wrapped in a template."""
        first, second = list(encode_chat("A")), list(encode_chat("B"))
        start = 0
        while start < min(len(first), len(second)) and first[start] == second[start]:
            start += 1
        end = 0
        while end < min(len(first), len(second)) - start and first[-1 - end] == second[-1 - end]:
            end += 1
        frame = cls(tuple(first[:start]), tuple(first[len(first) - end:]))
        return frame if frame.before or frame.after else None

    def spans(self, context: list[int]) -> list[tuple[int, int]]:
        """The template's own positions in ``context`` as [start, end) spans: its opening, where the context opens
        with it, and the first closing after it (the prompt's end); none where the context does not open with it."""
        n = len(self.before)
        if tuple(context[:n]) != self.before:
            return []
        spans = [(0, n)] if n else []
        m = len(self.after)
        for at in range(n, len(context) - m + 1) if m else ():
            if tuple(context[at:at + m]) == self.after:
                spans.append((at, at + m))
                break
        return spans


def template_free(spans: list[tuple[int, int]], start: int, stop: int) -> int:
    """How far from ``start`` (up to ``stop``) the context runs before a template span: the copyable length there
    (0 when ``start`` itself is the template's)."""
    for a, b in spans:
        if a <= start < b:
            return 0
        if start < a < stop:
            stop = a
    return max(0, stop - start)


class PromptLookupDrafter(Drafter):
    """Copy the continuation of the most recent earlier match of the context's last n-gram (trying n,
    then shorter n-grams down to 1, as Hugging Face's prompt lookup does). No model, no forward. With the chat
    template's ``frame``, a continuation never runs into the template's own tokens: a match whose continuation
    starts there is passed over for an earlier one, and one that runs into it is cut before it."""

    def __init__(self, n: int, frame: ChatFrame | None = None):
        self.n = n
        self.spec = self.about = f"prompt-lookup:{n}"
        self.frame = frame
        self._spans: list[tuple[int, int]] | None = None  # the template's spans in the prompt, once found

    def propose(self, context, k, cfg, rng, stop) -> Proposal:
        match = self._match(context)
        if match is None:
            return NO_PROPOSAL
        _, follow_at = match
        length = template_free(self._template(context), follow_at, follow_at + k)
        return Proposal(_until_stopped(context[follow_at: follow_at + length], stop))

    def _template(self, context: list[int]) -> list[tuple[int, int]]:
        """The template's spans in the context (found once: they lie in the prompt, which every later context
        starts with)."""
        if self.frame is None:
            return []
        pieces = (self.frame.before, self.frame.after)
        if self._spans is None or any(tuple(context[a:b]) not in pieces for a, b in self._spans):
            self._spans = self.frame.spans(context)  # a context that is not the prompt's continuation: look again
        return self._spans

    def evidence(self, context: list[int]) -> str | None:
        """The matched n-gram's size: on the shipped prompts a 1-gram match's draft gains 0.42 accepted
        tokens per round, a 2- or 3-gram match's 1.95–2.29, so a cost-aware controller keeps them apart."""
        match = self._match(context)
        return None if match is None else f"{match[0]}-gram match"

    def _match(self, context: list[int]) -> tuple[int, int] | None:
        """(n-gram size, where its continuation starts) of the longest recent match, or None; a continuation
        that would start inside the chat template is no match."""
        length = len(context)
        spans = self._template(context)
        for size in range(min(self.n, length - 1), 0, -1):
            tail = context[length - size:]
            # the most recent earlier occurrence that has at least one token after it
            for start in range(length - size - 1, -1, -1):
                if context[start:start + size] == tail and template_free(spans, start + size, length):
                    return size, start + size
        return None


def _until_stopped(tokens: list[int], stop: StopRule) -> list[int]:
    """The copied tokens up to the stop rule's stop (it sees a copied draft step by step)."""
    for step in range(len(tokens)):
        if not stop.keep_drafting(step, None):
            return list(tokens[: step + 1])
    return list(tokens)
