"""The draft kinds ``int4`` and ``int8``: the target's own weights in low bits (``lowbit_copy``) drafting
autoregressively with their own KV cache, rolled back after each verification like any model draft."""

from __future__ import annotations

from ...drafts import DraftKind, register_kind
from ...engine.drafters import ForwardDrafter
from ...errors import ExplorerError
from ...limits import clip
from .lowbit_copy import BITS, lowbit_copy

DRAFT_KINDS = BITS

# teacher-forced greedy agreement of the int4 copy with the fp32 default model on 10 held-out prompts × 64
# tokens (lowbit_copy's docstring): a prior for the controllers' α where the copy is the GGUF's own blocks
EXACT_INT4_AGREEMENT = 0.988


def _build(spec: str, argument: str, target, load_model) -> ForwardDrafter:
    bits = spec.partition(":")[0]
    if argument:
        raise ExplorerError(f"bad draft {clip(spec, 40)}: write {bits} (the target's own weights in low bits)")
    copy = lowbit_copy(target, bits)
    prior = EXACT_INT4_AGREEMENT if copy.exact_weights else None
    return ForwardDrafter(bits, forward=copy.decoder, device=target.device, about=copy.about(),
                          expected_acceptance=prior, row_scorer=lambda: copy.decoder.row_scorer(target.device))


register_kind(DraftKind(
    "int4", "int4", _build, examples=("int4",), gives_distributions=True,
    glossary="the target's **own weights in 4 bits** (for the default model, the GGUF's Q4_1 blocks: exactly the "
             "target's weights) with bf16 activations and a 4-bit pass over the LM head: a draft that agrees with the target "
             "almost always, at a fraction of its cost."))
register_kind(DraftKind(
    "int8", "int8", _build, examples=("int8",), gives_distributions=True,
    glossary="the target's own weights rounded to **8 bits** per row, bf16 activations: twice the bytes of int4, "
             "and for the default model no closer to it (its int4 codes are its exact weights)."))
