"""Draft specs to drafters: ``model:<name>``, ``early-exit:N[:untrained]``, ``feature-head[:untrained]``
and ``prompt-lookup:n``.

Outside the engine on purpose: an early-exit draft is EESD's (``explorer.methods.eesd``: the shipped exit
layer, its θ_M predictor, the shared-cache forward) and a feature head EAGLE's (``explorer.methods.eagle``),
both built on the engine.
"""

from __future__ import annotations

from .engine.drafters import Drafter, ForwardDrafter, PromptLookupDrafter
from .engine.forward import full_forward
from .errors import ExplorerError
from .limits import clip


def make_drafter(spec, target, load_model, verifying_method: str | None = None) -> Drafter:
    """A drafter from a spec string, a loaded model or a ``transformers`` model object.

    ``load_model`` turns a model spec or object into a ``LoadedModel`` (``explorer.models.load``).
    ``verifying_method``: the name of a method that verifies with a target runner of its own (BiLD, beam
    search, a hierarchical chain); a draft that reads what the speculative round loop's verification
    computes (the feature head) is refused there with one line saying where it runs.
    """
    drafter = _drafter(spec, target, load_model)
    if verifying_method is not None and drafter.needs_round_verifier:
        raise ExplorerError(f"{drafter.spec} drafts from the target features that the speculative round loop's "
                            f"verification computes, and {verifying_method} verifies its own way: run it with "
                            "method speculative, lenient or eagle")
    return drafter


def _drafter(spec, target, load_model) -> Drafter:
    if not isinstance(spec, str):
        return _model_drafter(load_model(spec), target)
    if ">" in spec:
        raise ExplorerError(f"{clip(spec, 60)} is a draft chain (smaller>larger): run it with method hierarchical")
    kind, _, arg = spec.strip().partition(":")
    if kind == "model" and arg:
        return _model_drafter(load_model(arg), target, spec)
    if kind == "early-exit":
        # here, not at the top: the eesd method's module imports this one (its draft is such a spec)
        from .methods.eesd.drafter import early_exit_drafter

        n_text, _, variant = arg.partition(":")
        n = positive_int(n_text, spec, "early-exit:N (N = layers of the target to keep)")
        if variant not in ("", "untrained"):
            raise ExplorerError(f"bad draft {spec!r}: write early-exit:N or early-exit:N:untrained")
        return early_exit_drafter(spec, n, variant != "untrained", target)
    if kind == "feature-head":
        from .methods.eagle.drafter import feature_head_drafter

        if arg not in ("", "untrained"):
            raise ExplorerError(f"bad draft {clip(spec, 60)}: write feature-head or feature-head:untrained")
        return feature_head_drafter(spec.strip(), arg != "untrained", target)
    if kind == "prompt-lookup":
        n = positive_int(arg, spec, "prompt-lookup:n (n = the n-gram size)")
        return PromptLookupDrafter(n)
    raise ExplorerError(
        f"unknown draft {clip(spec, 60)}: use model:<name>, early-exit:N, feature-head or prompt-lookup:n"
    )


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


def positive_int(text: str, spec: str, form: str) -> int:
    try:
        value = int(text)
        if value < 1:
            raise ValueError
    except ValueError:
        raise ExplorerError(f"bad draft {spec!r}: write {form} with a whole number >= 1") from None
    return value
