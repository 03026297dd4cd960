"""Drafters: propose up to k tokens, with their draft distributions q when they have them.

Protocol (``Drafter``): ``propose(context, k, ...)`` returns a ``Proposal``; ``rollback(context)`` drops
whatever the drafter cached past the committed context. A drafter that can say cheaply, before drafting,
what its next draft would rest on also has ``evidence(context)`` (a short label, or None); controllers
that learn acceptance per kind of evidence (``cost-aware``) use it. Three kinds:

    model:<name>       a separate small model with the target's vocabulary
    early-exit:N       a view of the target's first N layers plus an exit head (EESD 3.1)
    prompt-lookup:n    copy what followed the last earlier occurrence of the context's final n-gram
                       (Leviathan et al. 3.6; deterministic, so q is a point mass)

Shape legend: K drafted tokens, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from ..errors import ExplorerError
from ..exits import exit_for
from .cache import CachedForward, common_prefix
from .controllers import Controller
from .forward import full_forward
from .self_draft import DraftRunner, SelfSpeculation, SharedVerifier
from .sampling import Rng, SamplingConfig, choose, distribution


@dataclass(frozen=True)
class Proposal:
    """Drafted ids and, for a model draft, their distributions q (K, V); None means point masses."""

    tokens: list[int]
    q: torch.Tensor | None = None
    forwards: int = 0


NO_PROPOSAL = Proposal([])


class Drafter(Protocol):
    spec: str

    def propose(self, context: list[int], k: int, cfg: SamplingConfig, rng: Rng,
                controller: Controller) -> Proposal: ...

    def rollback(self, context: list[int]) -> None: ...


class ForwardDrafter:
    """Drafts autoregressively with any forward function that has its own KV cache.

    Each step runs one token (the cache keeps everything before), draws from q with the run's sampling
    warp, and asks the controller whether to go on.
    """

    def __init__(self, spec: str, forward=None, device: torch.device | None = None, runner=None):
        self.spec = spec
        self.runner = runner if runner is not None else CachedForward(forward, device)
        self.verifier = None  # a target runner sharing this draft's computation (early exit), if any
        self.expected_acceptance: float | None = None  # measured offline (a trained exit's agreement), if known
        self.about = spec  # one line for people: which draft this is

    def propose(self, context, k, cfg, rng, controller) -> Proposal:
        sequence = list(context)
        tokens, rows = [], []
        before = self.runner.forwards
        for step in range(k):
            q_row = distribution(self.runner.logits(sequence, 1), cfg)[0]  # (V,)
            token = choose(q_row, cfg, rng.on(q_row.device))
            tokens.append(token)
            rows.append(q_row)
            sequence.append(token)
            if not controller.keep_drafting(step, q_row):
                break
        q = torch.stack(rows) if rows else None  # (K, V)
        return Proposal(tokens, q, self.runner.forwards - before)

    def rollback(self, context: list[int]) -> None:
        self.runner.truncate(common_prefix(self.runner.ids, context))


class PromptLookupDrafter:
    """Copy the continuation of the most recent earlier match of the context's last n-gram (trying n,
    then shorter n-grams down to 1, as Hugging Face's prompt lookup does). No model, no forward."""

    def __init__(self, n: int):
        self.n = n
        self.spec = f"prompt-lookup:{n}"

    def propose(self, context, k, cfg, rng, controller) -> Proposal:
        match = self._match(context)
        if match is None:
            return NO_PROPOSAL
        _, follow_at = match
        return Proposal(_until_stopped(context[follow_at: follow_at + k], controller))

    def evidence(self, context: list[int]) -> str | None:
        """The matched n-gram's size: on the shipped prompts a 1-gram match's draft gains 0.42 accepted
        tokens per round, a 2- or 3-gram match's 1.95–2.29, so a cost-aware controller keeps them apart."""
        match = self._match(context)
        return None if match is None else f"{match[0]}-gram match"

    def _match(self, context: list[int]) -> tuple[int, int] | None:
        """(n-gram size, where its continuation starts) of the longest recent match, or None."""
        length = len(context)
        for size in range(min(self.n, length - 1), 0, -1):
            tail = context[length - size:]
            # the most recent earlier occurrence that has at least one token after it
            for start in range(length - size - 1, -1, -1):
                if context[start:start + size] == tail:
                    return size, start + size
        return None

    def rollback(self, context: list[int]) -> None:
        pass


def _until_stopped(tokens: list[int], controller: Controller) -> list[int]:
    """The copied tokens up to the controller's stop (a stop rule sees a copied draft step by step)."""
    for step in range(len(tokens)):
        if not controller.keep_drafting(step, None):
            return list(tokens[: step + 1])
    return list(tokens)


def make_drafter(spec, target, load_model) -> Drafter:
    """A drafter from a spec string, a loaded model or a ``transformers`` model object.

    ``load_model`` turns a model spec or object into a ``LoadedModel`` (``explorer.models.load``).
    """
    if not isinstance(spec, str):
        return _model_drafter(load_model(spec), target)
    kind, _, arg = spec.strip().partition(":")
    if kind == "model" and arg:
        return _model_drafter(load_model(arg), target, spec)
    if kind == "early-exit":
        return early_exit_drafter(spec, arg, target)
    if kind == "prompt-lookup":
        n = _positive_int(arg, spec, "prompt-lookup:n (n = the n-gram size)")
        return PromptLookupDrafter(n)
    raise ExplorerError(
        f"unknown draft {spec!r}: use model:<name>, early-exit:N or prompt-lookup:n"
    )


def early_exit_drafter(spec: str, arg: str, target) -> ForwardDrafter:
    """``early-exit:N`` (the trained exit layer for this model and N when one ships, else untrained) or
    ``early-exit:N:untrained``; drafting and verification share one cache (EESD 3.1)."""
    n_text, _, variant = arg.partition(":")
    n = _positive_int(n_text, spec, "early-exit:N (N = layers of the target to keep)")
    if variant not in ("", "untrained"):
        raise ExplorerError(f"bad draft {spec!r}: write early-exit:N or early-exit:N:untrained")
    head = exit_for(target.model, n, trained=variant != "untrained")
    shared = SelfSpeculation(target.model, head, target.device)
    drafter = ForwardDrafter(spec, runner=DraftRunner(shared))
    drafter.verifier = SharedVerifier(shared)
    drafter.about = f"{spec}: first {n} layers + {head.describe()}"
    agreement = head.manifest.get("heldout_agreement") if head.trained else None
    if isinstance(agreement, (int, float)):  # measured when the exit was trained: a prior for cost-aware's α
        drafter.expected_acceptance = float(agreement)
    predictor = _theta_predictor(target.model, head)
    if predictor is not None:  # cali-ts's θ_M (EESD eq. 5) from the target's and the exit's states
        def theta_model(step: int, q_row) -> float | None:
            states = shared.theta_states(step)
            return predictor(step + 1, *states) if states is not None else None

        drafter.theta_model = theta_model
        drafter.about += f" + θ_M predictor ({predictor.path.name})"
    return drafter


def _theta_predictor(model, head):
    """The trained θ_M predictor shipped beside a trained exit, if any."""
    from ..theta_predictor import find_predictor, load_predictor

    path = find_predictor(model, head.n_layers) if head.trained else None
    return load_predictor(model, path) if path is not None else None


def _model_drafter(draft, target, spec: str | None = None) -> ForwardDrafter:
    if draft.vocab_size != target.vocab_size or not _same_tokenizer(draft.tokenizer, target.tokenizer):
        raise ExplorerError(
            f"the draft {draft.name!r} and the target {target.name!r} have different vocabularies "
            f"({draft.vocab_size} vs {target.vocab_size} ids): a draft model must share the target's tokenizer"
        )
    return ForwardDrafter(spec or f"model:{draft.name}", full_forward(draft.model), draft.device)


def _same_tokenizer(a, b) -> bool:
    if a is None or b is None or a is b:
        return True
    vocab_a, vocab_b = getattr(a, "get_vocab", None), getattr(b, "get_vocab", None)
    if vocab_a is None or vocab_b is None:
        return type(a) is type(b)
    return vocab_a() == vocab_b()


def _positive_int(text: str, spec: str, form: str) -> int:
    try:
        value = int(text)
        if value < 1:
            raise ValueError
    except ValueError:
        raise ExplorerError(f"bad draft {spec!r}: write {form} with a whole number >= 1") from None
    return value
