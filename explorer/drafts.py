"""Draft specs to drafters: ``model:<name>``, ``early-exit:N[:untrained]`` and ``prompt-lookup:n``.

Outside the engine on purpose: an early-exit draft needs the shipped artifacts (the trained exit layer,
its θ_M predictor), which live above the engine (``explorer.exits``, ``explorer.theta_predictor``).
"""

from __future__ import annotations

from .engine.drafters import Drafter, ForwardDrafter, PromptLookupDrafter
from .engine.forward import full_forward
from .engine.self_draft import DraftRunner, SelfSpeculation, SharedVerifier
from .errors import ExplorerError
from .exits import exit_for


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
    about = f"{spec}: first {n} layers + {head.describe()}"
    agreement = head.manifest.get("heldout_agreement") if head.trained else None
    predictor = _theta_predictor(target.model, head)
    theta_model = None
    if predictor is not None:  # cali-ts's θ_M (EESD eq. 5) from the target's and the exit's states
        def theta_model(step: int, q_row) -> float | None:
            states = shared.theta_states(step)
            return predictor(step + 1, *states) if states is not None else None

        about += f" + θ_M predictor ({predictor.path.name})"
    # drafting and verification share one cache; a trained exit's held-out agreement is a prior for α
    return ForwardDrafter(spec, runner=DraftRunner(shared), verifier=SharedVerifier(shared), about=about,
                          expected_acceptance=float(agreement) if isinstance(agreement, (int, float)) else None,
                          theta_model=theta_model)


def _theta_predictor(model, head):
    """The trained θ_M predictor shipped beside a trained exit, if any."""
    from .theta_predictor import find_predictor, load_predictor

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
