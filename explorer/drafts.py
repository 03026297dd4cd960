"""Draft specs to drafters: ``<kind>:<argument>``, each kind registered once with the form it is written in
and how it is built (``register_kind``): ``model:<name>`` and ``prompt-lookup:n`` here; ``early-exit:N``
(EESD's exit, ``explorer.methods.eesd``) and ``feature-head`` (EAGLE's head, ``explorer.methods.eagle``)
by the method packages that own them, so nothing here names a method. A spec with ``>`` is a draft chain
(kind ``chain``), which only the hierarchical method runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .engine.drafters import ChatFrame, Drafter, ForwardDrafter, PromptLookupDrafter
from .engine.forward import full_forward
from .engine.trie_cache import model_trie
from .errors import ExplorerError
from .limits import clip
from .untrusted import Record


@dataclass(frozen=True)
class DraftKind:
    """One kind of draft: ``build(spec, argument, target, load_model)`` gives its drafter (``argument``:
    what follows ``<name>:``); ``form`` is how it is written, for messages; ``detail`` the keys its
    drafter adds to a round's ``detail`` (checked when a trace is loaded); ``glossary`` its words;
    ``examples`` the specs the page's drafter menu offers, or a function giving them (a kind whose trained parts
    ship for some sizes reads them from its artifacts); ``gives_distributions`` whether its drafters give q for
    every token from a forward of their own (``Drafter.gives_distributions``: what BiLD's small model and beam
    search's exact rule need); ``hf_assistant(model, argument)`` the model object Hugging Face's assisted generation
    is handed as the same draft (the benchmark's baseline, ``explorer.hf_systems``), None where it has none."""

    name: str
    form: str
    build: Callable[[str, str, object, Callable], Drafter]
    detail: Record | None = None
    glossary: str = ""
    examples: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    gives_distributions: bool = False
    hf_assistant: Callable[[object, str], object] | None = None


KINDS: dict[str, DraftKind] = {}


def register_kind(kind: DraftKind) -> DraftKind:
    KINDS[kind.name] = kind
    return kind


def order_kinds(order: tuple[str, ...]) -> None:
    """Put the registered kinds in ``order`` (the registry's explicit one), those it does not name after them as
    they registered: every list of kinds (messages, the drafter menu, the glossary) reads them in this order."""
    ranked = sorted(KINDS.values(), key=lambda k: order.index(k.name) if k.name in order else len(order))
    KINDS.clear()
    KINDS.update((k.name, k) for k in ranked)


def draft_kind(spec: str) -> str:
    """The kind a draft spec names: ``chain`` for ``a>b``, else what comes before the first colon."""
    return "chain" if ">" in spec else spec.strip().partition(":")[0]


def draft_forms() -> str:
    """The registered kinds as they are written: "model:<name>, prompt-lookup:n, … or feature-head"."""
    forms = [k.form for k in KINDS.values()]
    return ", ".join(forms[:-1]) + " or " + forms[-1] if len(forms) > 1 else "".join(forms)


def distribution_kinds() -> tuple[str, ...]:
    """The kinds whose drafters give q from a forward of their own (``DraftKind.gives_distributions``), in
    registration order: read at each use, so a kind registered later is there too."""
    return tuple(k.name for k in KINDS.values() if k.gives_distributions)


def draft_examples() -> list[str]:
    """Every registered kind's example specs, for the page's drafter menu."""
    return [spec for kind in KINDS.values()
            for spec in (kind.examples() if callable(kind.examples) else kind.examples)]


def kinds_in(spec: str | None) -> list[DraftKind]:
    """The registered kinds a (recorded) draft spec names, a chain's each."""
    return [KINDS[k] for part in str(spec or "").split(">") if (k := draft_kind(part)) in KINDS]


def make_drafter(spec, target, load_model, verifying_method: str | None = None) -> Drafter:
    """A drafter from a spec string, a loaded model or a ``transformers`` model object.

    ``load_model`` turns a model spec or object into a ``LoadedModel`` (``explorer.models.load``).
    ``verifying_method``: the name of a method that verifies with a target runner of its own rather than
    the speculative round loop's; a draft that reads what that loop's verification computes (the feature
    head) is refused there with one line saying so.
    """
    drafter = _drafter(spec, target, load_model)
    if verifying_method is not None and drafter.needs_round_verifier:
        raise ExplorerError(f"{drafter.spec} drafts from the target features that the speculative round loop's "
                            f"verification computes, and {verifying_method} verifies its own way: run it with a "
                            "method that verifies in that loop")
    return drafter


def _drafter(spec, target, load_model) -> Drafter:
    if not isinstance(spec, str):
        return _model_drafter(load_model(spec), target)
    if ">" in spec:
        raise ExplorerError(f"{clip(spec, 60)} is a draft chain (smaller>larger), not one draft")
    name, _, argument = spec.strip().partition(":")
    kind = KINDS.get(name)
    if kind is None:
        raise ExplorerError(f"unknown draft {clip(spec, 60)}: use {draft_forms()}")
    return kind.build(spec.strip(), argument, target, load_model)


def _model_drafter(draft, target, spec: str | None = None) -> ForwardDrafter:
    if draft.vocab_size != target.vocab_size or not _same_tokenizer(draft.tokenizer, target.tokenizer):
        raise ExplorerError(
            f"the draft {draft.name!r} and the target {target.name!r} have different vocabularies "
            f"({draft.vocab_size} vs {target.vocab_size} ids): a draft model must share the target's tokenizer"
        )
    return ForwardDrafter(spec or f"model:{draft.name}", full_forward(draft.model), draft.device,
                          row_scorer=lambda: model_trie(draft.model, draft.device))


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


def _model(spec, argument, target, load_model):
    if not argument:
        raise ExplorerError(f"bad draft {spec!r}: write model:<name>")
    return _model_drafter(load_model(argument), target, spec)


def _prompt_lookup(spec, argument, target, load_model):
    return PromptLookupDrafter(positive_int(argument, spec, "prompt-lookup:n (n = the n-gram size)"),
                               chat_frame(target))


def chat_frame(target) -> ChatFrame | None:
    """The target's chat template around a message (``ChatFrame``), which a draft copying from the context leaves
    alone; None for a model without a tokenizer or a template."""
    if getattr(target, "tokenizer", None) is None:
        return None
    return ChatFrame.of(lambda text: target.encode(text, chat=True))


register_kind(DraftKind("model", "model:<name>", _model, examples=("model:default",), gives_distributions=True,
                        glossary="a smaller model with the target's tokenizer (model:default: the default model)."))
register_kind(DraftKind("prompt-lookup", "prompt-lookup:n", _prompt_lookup,
                        examples=("prompt-lookup:3", "prompt-lookup:2"),
                        glossary="no model: the draft copies what followed the last n tokens where they appeared "
                                 "earlier in the prompt or the output (free, and right when text repeats)."))
