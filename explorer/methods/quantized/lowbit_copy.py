"""The target's own weights in low bits, as a second model over the same decoder (``engine.lowbit_decoder``).

    int4  every linear of every layer in 4 bits, groups of 32 (Q4_1). For the default model the codes,
          scales and minima are the GGUF's own blocks (``models.gguf``): the float32 target *is* those blocks
          de-quantised, so the copy's weights are the target's exactly and only its activations (bf16) and
          its LM head differ. Any other model: round-to-nearest per group of 32 from its float weights.
    int8  every linear rounded to int8 per output row from the float weights.

Both score the LM head in two passes (``engine.lowbit.ShortlistHead``): all 49 152 rows through a 4-bit
product find the top 16, which are then scored exactly in float32 from the target's own head weight. Measured
on this project's machine kind (AMD EPYC, AVX-512 bf16, 2 cores; 10 held-out prompts × 64 greedy tokens,
teacher-forced agreement with the fp32 target, 605 positions), the int4 copy agrees with the target
0.988 with that head, 0.975 with a bf16 head, 0.964 with an int8-per-row head and 0.873 with a 4-bit one; one
step of the copy took 4.54 ms with it against 4.67 with the int8 head, while a bf16 head adds ≈ 1.8 ms (its
product alone 2.2 ms a row against 0.35 for int8), and a head of only the 16 384 tokens the target writes most
saved 0.3 ms for 1.7 points of agreement (``docs/measurements.md``, "The target's own weights in 4 bits"). On a
CPU with AVX-512 VNNI the products run ``engine.q4_vnni``'s kernel: 2026-11-28, the same 605 positions agreed 0.988
with it against 0.980 on torch's int4 kernel, and a step took 7.1 ms against 8.5 (#49).

A copy is built once per target model and process (≈ 3 s for the default: reading 210 GGUF tensors,
checking each against the loaded weights, packing) and shared read-only, like the target.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import torch

from ...engine.lowbit import Int4Blocks, LowBitLinear, ShortlistHead
from ...engine.lowbit_decoder import LowBitDecoder
from ...engine.forward import decoder_parts
from ...errors import ExplorerError
from ...notices import announce
from ...models.default import local_default_gguf
from ...models.gguf import q4_1_blocks
from ...models.loaded import DERIVED_BYTES, LoadedModel, resident_bytes

BITS = ("int4", "int8")
ACTIVATIONS = torch.bfloat16  # torch's low-bit kernels are vectorised for bf16 activations only (engine.lowbit)
SHORTLIST = 16  # head rows scored exactly per position (4 agreed 0.985, 16 and 64 0.988)


@dataclass(frozen=True)
class LowBitCopy:
    """A built copy: its decoder (the ``ForwardFn``), where its weights came from and how it runs, in words."""

    decoder: LowBitDecoder
    bits: str
    source: str  # "the GGUF's Q4_1 blocks (exact)" | "round-to-nearest …"
    exact_weights: bool  # the copy's weights equal the target's (the GGUF's own blocks)

    def about(self) -> str:
        """One line for people: which weights, which kernels, compiled or not."""
        kernel = self.decoder.layers[0].qkv.note
        head = self.decoder.head.note
        how = "compiled" if self.decoder.compiled() else "eager"
        if self.decoder.whole_step():  # engine.lowbit_decoder: a drafting step's layers in one C++ call
            how += ", and a one-token step runs every layer and the head in one call"
        twice = self.decoder.layers[0].qkv.family == "int4x8"
        rounded = " (each product's input rounded to int8 twice over)" if twice else ""
        return (f"{self.bits}: the target's own weights in {self.bits[3:]} bits ({self.source}), "
                f"bf16 activations{rounded}; "
                f"products: {kernel}; LM head: {head}; layers {how}; "
                f"{self.decoder.weight_bytes() / 1e6:.0f} MB read per step")


@dataclass(frozen=True, eq=False)
class CopyModel(LoadedModel):
    """The copy as a model of its own: the target's tokenizer, end tokens, device and name (its trace is the
    target's prompt decoded), and the copy's decoder as the forward that decodes. Plain decoding (``ar``) over it is
    the copy alone, as a quantised model is served."""

    copy: LowBitCopy | None = None

    @classmethod
    def of(cls, target: LoadedModel, copy: LowBitCopy) -> "CopyModel":
        return cls(target.name, target.model, target.tokenizer, target.device, target.dtype, copy)

    def forward(self, input_ids: torch.Tensor, cache, n_logits: int) -> torch.Tensor:
        """The copy's decoder step (``engine.forward.ForwardFn``): what scores each round in place of the target's."""
        return self.copy.decoder(input_ids, cache, n_logits)


_COPIES: "weakref.WeakKeyDictionary[torch.nn.Module, dict[str, LowBitCopy]]" = weakref.WeakKeyDictionary()
# what each copy costs: its packed weights, or the resident memory its build took, whichever is more (the default's
# int4 copy packs 84 MB, and its build — the GGUF's blocks read and checked — took ≈ 410 MB that stays resident)
_BYTES: "weakref.WeakKeyDictionary[torch.nn.Module, dict[str, int]]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def copies_bytes(model: torch.nn.Module) -> int:
    """Bytes the low-bit copies built of ``model`` hold (counted in the model cache's budget)."""
    with _LOCK:
        return sum(_BYTES.get(model, {}).values())


DERIVED_BYTES.append(copies_bytes)


def lowbit_copy(target, bits: str) -> LowBitCopy:
    """The ``bits`` copy of ``target`` (a ``LoadedModel``), built on first use; ``ExplorerError`` in one line
    for a model it cannot be made of."""
    if bits not in BITS:
        raise ExplorerError(f"unknown low-bit copy {bits!r}: use {' or '.join(BITS)}")
    model = target.model
    with _LOCK:
        built = _COPIES.setdefault(model, {})
        if bits not in built:
            before = resident_bytes()
            announce(f"Building the target's {bits[3:]}-bit copy of its own weights, once for this process (with its "
                     "layers' compilation, once per machine: seconds to half a minute) …")
            built[bits] = _build(target, bits)
            _BYTES.setdefault(model, {})[bits] = max(built[bits].decoder.weight_bytes(), resident_bytes() - before)
        return built[bits]


# a Llama layer's four products, as the fused layer runs them: (module, the linears stacked into one)
PRODUCTS = (("self_attn", ("q_proj", "k_proj", "v_proj")), ("self_attn", ("o_proj",)),
            ("mlp", ("gate_proj", "up_proj")), ("mlp", ("down_proj",)))


def _build(target, bits: str) -> LowBitCopy:
    model = target.model
    try:
        base = decoder_parts(model)
    except ExplorerError:
        raise ExplorerError(f"a {bits} self-draft needs a Llama-style decoder; {type(model).__name__} has another "
                            "layout: use a model: or prompt-lookup draft") from None
    blocks, source, exact = _int4_blocks(target) if bits == "int4" else \
        ({}, "round-to-nearest per row from its float weights", False)
    products = []
    with torch.no_grad():
        for i, layer in enumerate(base.layers):
            made = []
            for part, names in PRODUCTS:
                linears = [getattr(getattr(layer, part), name) for name in names]
                keys = [f"model.layers.{i}.{part}.{name}.weight" for name in names]
                bias = None if linears[0].bias is None else torch.cat([m.bias for m in linears])
                if bits == "int4":
                    stacked = Int4Blocks.stacked([blocks[k] if k in blocks else Int4Blocks.rounded(m.weight)
                                                  for k, m in zip(keys, linears)])
                    made.append(LowBitLinear.int4(stacked, bias, ACTIVATIONS))
                else:
                    made.append(LowBitLinear.int8(torch.cat([m.weight for m in linears]), bias, ACTIVATIONS))
            products.append(tuple(made))
        head = ShortlistHead(model.get_output_embeddings().weight, SHORTLIST, ACTIVATIONS)
    try:
        decoder = LowBitDecoder(model, products, head, ACTIVATIONS)
    except ValueError as err:
        raise ExplorerError(f"a {bits} self-draft cannot be made of {type(model).__name__}: {err}") from None
    return LowBitCopy(decoder, bits, source, exact)


def _int4_blocks(target) -> tuple[dict[str, Int4Blocks], str, bool]:
    """For the default model, the GGUF's own Q4_1 blocks, each checked against the loaded weight (equal to
    the last bit: the target is those blocks de-quantised); else none, and each linear is rounded. Only the
    default is looked up: opening the GGUF costs ≈ 3 s."""
    rounded = "round-to-nearest per group of 32 from its float weights"
    model, config = target.model, target.model.config
    path = local_default_gguf() if target.name == "default" else None
    if path is None or model.dtype != torch.float32 or getattr(config, "model_type", "") != "llama":
        return {}, rounded, False
    try:
        blocks = {name: b.to(model.device) for name, b in q4_1_blocks(path, config).items()}
    except (OSError, ValueError, KeyError, ImportError):
        return {}, rounded, False
    weights = dict(model.named_parameters())
    linears = [n for n in weights if n.startswith("model.layers.") and n.endswith("_proj.weight")]
    if set(blocks) != set(linears) or not all(
            blocks[n].codes.shape == weights[n].shape and torch.equal(blocks[n].dense(), weights[n].detach())
            for n in linears):
        return {}, rounded, False
    return blocks, "the GGUF's own Q4_1 blocks, exactly the target's weights", True
