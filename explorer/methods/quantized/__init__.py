"""``quantized``: the target drafts for itself with its own weights in 4 bits, and verifies in full precision
(Leviathan et al., Algorithm 1); lossless. With ``role=alone`` the 4-bit copy decodes by itself, with no
verification: what serving a quantised model does — faster, and its text can differ (lossy, measured as
lenience is).

Why it pays on a CPU (Theorem 3.8): a draft that agrees with the target almost always (α ≈ 0.95) at a
fraction of its cost (c ≈ 0.3) is worth many tokens a round, where the trained drafts here agree 20–35 %
of the time. The default model ships as a 4-bit GGUF, so its 4-bit copy has *exactly* the target's weights;
only bf16 activations and the rounding of a 4-bit pass over the LM head separate the two (``lowbit_copy``). Quantised self-drafts are
what QSpec (Zhao et al. 2025), QuantSpec (Tiwari et al. 2025) and ML-SpecQD (Georganas et al. 2025) build,
reporting 1.6–2.7×.

This package registers the draft kinds ``int4`` and ``int8`` (``drafter``), which every method that takes
a chain draft runs (``speculative``, ``lenient``, ``bild``, a ``hierarchical`` chain, ``beam``), and the
method with its preset.
"""

from __future__ import annotations

import dataclasses

from ...drafts import make_drafter
from ...errors import ExplorerError
from ...limits import clip
from .. import Method, Options, Request, option, register
from ..speculative import run_speculative
from .drafter import DRAFT_KINDS
from .lowbit_copy import CopyModel, lowbit_copy

# Measured on this project's machine kind (docs/measurements.md, "The target's own weights in 4 bits"): the
# fastest controller and γ for the int4 self-draft of those swept (fixed γ 4–8, HF's heuristic from 4, 6, 8,
# dynamic γ, priced Thompson sampling).
PRESET = {"draft": "int4", "controller": "heuristic", "gamma": 8,
          "why": "The 4-bit copy agrees with the target ≈ 96 % of the time, so long drafts pay: Hugging Face's "
                 "schedule from γ = 8 (+2 after a round the target accepts whole, −1 after a refusal) was the "
                 "fastest measured on this CPU, ahead of a fixed γ = 6 (Theorem 3.8's optimum at α ≈ 0.93, c ≈ 0.3)."}


@dataclasses.dataclass(frozen=True)
class QuantizedOptions(Options):
    prefix = "quantized_"
    title = "The 4-bit copy: draft for the target, or decode alone"

    role: str = option("draft", "draft: the low-bit copy drafts and the full-precision target verifies every token "
                                "(lossless); alone: the copy decodes by itself with no target, as a quantised "
                                "model is served (faster, and its text can differ: lossy)",
                       choices=("draft", "alone"), label="the copy's role")


def start(request: Request, options: QuantizedOptions):
    spec = str(request.draft or PRESET["draft"]).strip()
    if options.role == "draft":
        return run_speculative(request, make_drafter(spec, request.target, request.load), "quantized")
    if spec not in DRAFT_KINDS:
        raise ExplorerError(f"quantized with role alone decodes with int4 or int8, not {clip(spec, 40)}")
    copy = lowbit_copy(request.target, spec)
    # alone is plain decoding of the copy (the copy is a model); the trace names what wrote its text: the copy by
    # itself, no draft and no target (#48)
    bits, _, how = copy.about().partition(": ")
    return run_speculative(dataclasses.replace(request, target=CopyModel.of(request.target, copy)), None, "quantized",
                           draft=(spec, f"{bits}: the copy alone, no target checks its text: {how}"))


def _system(rest: str) -> dict:
    """``quantized[:int4|int8][:alone][/controller]``."""
    spec, slash, controller = rest.partition("/")
    parts = spec.split(":") if spec else []
    keywords: dict = {}
    if parts and parts[-1] == "alone":
        parts = parts[:-1]
        keywords["quantized_role"] = "alone"
    if len(parts) > 1 or (slash and (not controller or keywords)) or (parts and parts[0] not in DRAFT_KINDS):
        raise ExplorerError(f"bad system quantized:{clip(rest, 40)}: write {SYNTAX}")
    if parts:
        keywords["draft"] = parts[0]
    if controller:
        keywords["controller"] = controller
    return keywords


SYNTAX = "quantized[:int4|int8][:alone][/controller][@γ]"

register(Method(
    name="quantized",
    paper="QSpec (Zhao et al. 2025), QuantSpec (Tiwari et al. 2025)",
    summary="the target drafts for itself with its own weights in 4 bits (bf16 activations) and verifies in full "
            "precision: lossless; with role alone the 4-bit copy decodes by itself (lossy)",
    lossy=lambda options: options is not None and options.role == "alone",
    options=QuantizedOptions,
    start=start,
    drafts=DRAFT_KINDS,
    default_draft=PRESET["draft"],
    draft_words="quantized drafts with the target's own weights in low bits: int4 or int8",
    preset=lambda target: dict(PRESET),
    system=_system,
    system_syntax=SYNTAX,
    glossary="**quantized** (self-drafting in low bits): the target's own weights, kept in 4 bits and run through a "
             "4-bit kernel, draft; the full-precision target verifies (lossless). Quantising a model is faster and "
             "changes its text; drafting with the quantised copy keeps the text and keeps most of the speed.",
))
