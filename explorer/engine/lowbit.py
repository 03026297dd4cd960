"""Linear layers whose weights stay in 4 or 8 bits: the product runs on the low-bit weights themselves
(weight-only quantisation), activations in bfloat16.

Why: a forward of a small model on a CPU streams its weights from memory once per token, so its cost is
about their bytes. Kept in 4 bits a Llama layer's weights are ≈ 1/6 of their float32 bytes (codes plus a
scale and a zero per group of 32), and a draft made of the target's own weights at that size costs a
fraction of a target step while agreeing with it almost always (Leviathan et al. Theorem 3.8: the speed-up
grows as c falls and α rises).

Formats (``GROUP`` = 32 weights along the input per scale):
    int4  w = d·q + m per group, codes q in 0–15: llama.cpp's Q4_1, exactly what the default model's GGUF
          stores. torch's kernel computes (q − 8)·scale + zero, so scale = d and zero = m + 8·d.
    int8  w = s·q per output row, codes q in −127…127.

Kernels: ``aten._weight_int4pack_mm_for_cpu`` (CPU) or ``aten._weight_int4pack_mm`` (CUDA: the tinygemm
kernel, its own packing of the same codes, ``pack_int4``) and ``aten._weight_int8pack_mm``; on a CPU with AVX-512
VNNI also ``engine.q4_vnni``'s "int4x8" (the same codes; each product's input rounded to int8 twice per group of
32; built here once). On x86 torch's are
vectorised for bfloat16 activations only (float32 ones run a scalar loop), and CUDA's int4 kernel takes
bfloat16 alone, so a low-bit product takes and gives bfloat16. Which runs is decided once per machine by measuring
this machine (``choose``): the low-bit kernel where it exists, agrees with the plain product and beats the same
weights de-quantised to bfloat16 through a plain product, else that plain product (the "dense" family: an
older torch, a device where the kernel loses, or ``EXPLORER_LOWBIT=0``). Both compute the same function up to
rounding; ``LowBitLinear.note`` says which runs.

Shape legend: R rows (tokens), I input features, O output features, G groups (I / GROUP).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time

import torch
import torch.nn.functional as F

from .products import LayerProduct, Product

GROUP = 32  # weights per scale along the input (Q4_1's block)
KERNEL_FAMILIES = ("int4", "int4x8", "int8")  # the low-bit kernels (int4x8: ``engine.q4_vnni``'s, int8 activations)
FAMILIES = KERNEL_FAMILIES + ("dense",)  # how a LowBitLinear multiplies (``multiply``)
# each kernel in the words the copy's one line uses (``choose``'s reasons)
KERNEL_WORDS = {"int4x8": "VNNI int4 × int8 kernel", "int4": "torch's int4 kernel", "int8": "torch's int8 kernel"}


@dataclasses.dataclass(frozen=True)
class Int4Blocks:
    """Weights (O, I) in groups of ``GROUP`` along I, w = scale·code + minimum (Q4_1). codes (O, I) uint8
    in 0–15; scale and minimum (O, G) float32."""

    codes: torch.Tensor
    scale: torch.Tensor
    minimum: torch.Tensor

    def dense(self) -> torch.Tensor:
        """The weights they stand for, (O, I) float32."""
        o, i = self.codes.shape
        groups = self.codes.view(o, i // GROUP, GROUP).float()  # (O, G, GROUP)
        return (groups * self.scale[..., None] + self.minimum[..., None]).view(o, i)

    @staticmethod
    def rounded(weight: torch.Tensor) -> "Int4Blocks":
        """Round-to-nearest onto each group's own 16-step grid from its minimum to its maximum (the grid Q4_1
        uses), for weights that were never stored in 4 bits."""
        o, i = weight.shape
        groups = weight.detach().float().view(o, i // GROUP, GROUP)  # (O, G, GROUP)
        low, high = groups.amin(-1), groups.amax(-1)  # (O, G)
        scale = (high - low) / 15
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # a constant group: codes 0, w = minimum
        codes = torch.round((groups - low[..., None]) / scale[..., None]).clamp_(0, 15).to(torch.uint8).view(o, i)
        return Int4Blocks(codes, scale, low)

    def to(self, device: torch.device) -> "Int4Blocks":
        return Int4Blocks(*(getattr(self, f.name).to(device) for f in dataclasses.fields(Int4Blocks)))

    @staticmethod
    def stacked(parts: list["Int4Blocks"]) -> "Int4Blocks":
        """Several matrices' rows one after another (q, k and v as one product)."""
        return Int4Blocks(*(torch.cat([getattr(p, f.name) for p in parts]) for f in dataclasses.fields(Int4Blocks)))


def int8_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric round-to-nearest per output row: codes (O, I) int8 and scales (O,) float32, w ≈ s·q."""
    w = weight.detach().float()
    scale = w.abs().amax(1) / 127  # (O,)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8), scale


def pack_int4(blocks: Int4Blocks, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(packed codes, scale-and-zero (G, O, 2) in ``dtype``): the tensors torch's int4 kernel on the blocks'
    device reads. It computes (q − 8)·scale + zero, so for Q4_1's d·q + m: scale = d, zero = m + 8·d. The CPU
    kernel packs codes (O, I) int32; CUDA's takes two codes a byte, (O, I/2) uint8, the even column in the high
    nibble, laid out in tiles of ``_inner_k_tiles`` × 16 columns."""
    codes = blocks.codes
    if codes.is_cuda:
        pairs = (codes[:, ::2].to(torch.uint8) << 4) | codes[:, 1::2].to(torch.uint8)  # (O, I/2)
        packed = torch.ops.aten._convert_weight_to_int4pack(pairs.contiguous(), _inner_k_tiles(codes.shape[1]))
    else:
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes.to(torch.int32), 1)
    scale_zero = torch.stack([blocks.scale, blocks.minimum + 8 * blocks.scale], dim=-1)  # (O, G, 2)
    return packed, scale_zero.transpose(0, 1).contiguous().to(dtype)  # (G, O, 2)


def rounded_tensors(family: str, weight: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """A float weight (O, I) rounded into the tensors ``family``'s ("int4" | "int8") kernel reads, scales in
    ``dtype``: int4 on Q4_1's grid per group of ``GROUP`` (``Int4Blocks.rounded``, packed by ``pack_int4``), int8
    per row (``int8_rows``). What the kernel choice times and the compiled layer is traced with."""
    if family == "int4":
        return pack_int4(Int4Blocks.rounded(weight), dtype)
    if family == "int4x8":
        return pack_int4x8(Int4Blocks.rounded(weight))
    codes, scales = int8_rows(weight)
    return codes, scales.to(dtype)


def pack_int4x8(blocks: Int4Blocks) -> tuple[torch.Tensor, torch.Tensor]:
    """The blocks in ``engine.q4_vnni``'s layout (its kernel loaded here, else a RuntimeError saying why not)."""
    from . import q4_vnni

    missing = q4_vnni.load()
    if missing is not None:
        raise RuntimeError(missing)
    return q4_vnni.pack(blocks.codes, blocks.scale, blocks.minimum)


def _inner_k_tiles(in_features: int) -> int:
    """CUDA's int4 layout: the largest tile count (8, 4 or 2) whose 16-column tiles divide the input."""
    return next((k for k in (8, 4, 2) if in_features % (16 * k) == 0), 2)


def multiply(family: str, x: torch.Tensor, tensors: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """(R, I) -> (R, O) through ``family``'s kernel over its ``tensors`` (see ``LowBitLinear``)."""
    if family == "int4":
        packed, scale_zero = tensors
        if x.is_cuda:
            return torch.ops.aten._weight_int4pack_mm(x, packed, GROUP, scale_zero)
        return torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed, GROUP, scale_zero)
    if family == "int4x8":
        return torch.ops.explorer_q4.gemm(x, *tensors)
    if family == "int8":
        codes, scales = tensors
        return torch.ops.aten._weight_int8pack_mm(x, codes, scales)
    return F.linear(x, tensors[0])


class LowBitLinear(torch.nn.Module, LayerProduct):
    """``y = x Wᵀ (+ b)`` over weights kept in low bits, x and y in ``dtype`` (bfloat16). ``family`` says
    which kernel runs (``FAMILIES``) and ``tensors`` what it reads: int4 (packed codes, scale-and-zero
    (G, O, 2)), int8 (codes (O, I), scales (O,)), dense (the de-quantised weight (O, I)). A compiled layer
    (``engine.compiled``) calls the same kernel on the same tensors (``compiled_form``)."""

    def __init__(self, family: str, tensors: tuple[torch.Tensor, ...], out_features: int, in_features: int,
                 bias: torch.Tensor | None, dtype: torch.dtype, note: str):
        super().__init__()
        self.family, self.tensors = family, tensors  # plain attributes: state_dict and .to() never see them
        self.out_features, self.in_features, self.dtype = out_features, in_features, dtype
        self.bias_tensor = None if bias is None else bias.detach().to(dtype)
        self.note = note

    @staticmethod
    def int4(blocks: Int4Blocks, bias: torch.Tensor | None = None, dtype: torch.dtype = torch.bfloat16) -> "LowBitLinear":
        """The blocks as they are (no new rounding of the codes; scale and zero in ``dtype``), on the int4
        kernel where ``choose`` picks it, else de-quantised."""
        o, i = blocks.codes.shape
        family, why = choose("int4", blocks.codes.device, dtype, o, i)
        if family == "int4":
            tensors = pack_int4(blocks, dtype)
        elif family == "int4x8":
            tensors = pack_int4x8(blocks)
        else:
            tensors = (blocks.dense().to(dtype),)
        return LowBitLinear(family, tensors, o, i, bias, dtype, why)

    @staticmethod
    def int8(weight: torch.Tensor, bias: torch.Tensor | None = None, dtype: torch.dtype = torch.bfloat16) -> "LowBitLinear":
        """``weight`` rounded to int8 per row, on the int8 kernel where ``choose`` picks it, else de-quantised."""
        o, i = weight.shape
        codes, scales = int8_rows(weight)
        family, why = choose("int8", weight.device, dtype, o, i)
        tensors = (codes, scales.to(dtype)) if family == "int8" else ((codes.float() * scales[:, None]).to(dtype),)
        return LowBitLinear(family, tensors, o, i, bias, dtype, why)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features)  # (R, I)
        if flat.dtype != self.dtype or not flat.is_contiguous():
            flat = flat.to(self.dtype).contiguous()
        out = multiply(self.family, flat, self.tensors)  # (R, O)
        if self.bias_tensor is not None:
            out = out + self.bias_tensor
        return out.reshape(*x.shape[:-1], self.out_features)

    def compiled_form(self, kind: str | None = None) -> tuple[str, tuple[torch.Tensor, ...]]:
        """(family, tensors) as the compiled layer takes them (the row bucket's ``kind`` does not matter here)."""
        return self.family, self.tensors

    def extra_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, family={self.family}"


class ShortlistHead(torch.nn.Module, Product):
    """An LM head in two passes: every row through a 4-bit product finds the few tokens that can win (the top
    ``k``), and those rows are then scored from the model's own float weight in float32. Why: a low-bit
    product takes and gives bf16, and logits of magnitude 20–30 in bf16 are rounded to 0.125–0.25, which
    turns the target's close calls into ties the copy breaks its own way: measured on the default model (10
    held-out prompts × 64 tokens, teacher-forced), the int4 copy with an int8 head agreed 0.964 with the
    target, with this head 0.988, and its step was 0.1 ms shorter (the 4-bit pass reads 17 MB, the int8
    one 28). The logits outside the shortlist stay the coarse ones: a distribution all the same, so sampling
    from it and verifying against it is exact. (…, H) -> float32 (…, V)."""

    def __init__(self, weight: torch.Tensor, k: int = 16, dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        self.k = min(k, weight.shape[0])
        self.coarse = LowBitLinear.int4(Int4Blocks.rounded(weight), None, dtype)
        self.weight = weight.detach()  # the model's own head: shared, never copied
        self.note = f"{self.coarse.note}, its top {self.k} scored exactly in float32"
        self.out_features, self.in_features = weight.shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features)  # (R, H)
        logits = self.coarse(flat).float()  # (R, V)
        top = logits.topk(self.k, dim=-1).indices  # (R, k)
        exact = torch.einsum("rh,rkh->rk", flat.float(), self.weight[top].float())  # (R, k)
        return logits.scatter_(-1, top, exact).reshape(*x.shape[:-1], self.out_features)

    def extra_bytes(self) -> int:
        return self.coarse.extra_bytes()


# -- which kernel runs, measured once per machine -----------------------------------------------------------

_CHOICES: dict[tuple, tuple[str, str]] = {}
_LOCK = threading.Lock()
PROBE_SHAPE = (1536, 576)  # (O, I) of the product timed for the choice: a default-model MLP matrix
# the de-quantised product wins only when clearly faster: timed on one matrix that stays in the cache it favours
# the bigger weights, while a forward streams every layer's from memory, where the low-bit bytes pay
CLEARLY_FASTER = 0.8
ROUNDS = 3  # timings of both products, interleaved; dense must win every one
CHOICE_VERSION = 3  # of the record kept per machine; another version is measured again (2: int4x8 competes; 3: words)


def choose(bits: str, device: torch.device, dtype: torch.dtype, out_features: int, in_features: int) -> tuple[str, str]:
    """(family, why in a few words) for a ``bits`` ("int4" | "int8") product of this shape: the low-bit kernel
    where it runs here and agrees with the plain product (for int4 on a CPU, ``engine.q4_vnni``'s "int4x8" unless
    torch's was clearly faster in every timing; ``_measure``), unless the same weights de-quantised to ``dtype`` were
    clearly faster in every one of ``ROUNDS`` interleaved timings taken while the machine's pace held; "dense"
    otherwise. Decided once per machine and kept (``$EXPLORER_CACHE/kernels``): the choice changes the copy's
    rounding, so one busy moment must not change it from one process to the next (#49: a fresh app under load
    timed the kernel slower, chose bf16, and two identical runs then accepted 58/72 and 59/59 drafts)."""
    if os.environ.get("EXPLORER_LOWBIT", "1").strip().lower() in ("0", "false", "no", "off"):
        return "dense", f"de-quantised to {_name(dtype)} (EXPLORER_LOWBIT=0)"
    if bits == "int4" and (out_features % 16 or in_features % GROUP):
        return "dense", f"de-quantised to {_name(dtype)} (the int4 kernel takes {GROUP}-wide groups and rows by 16)"
    with _LOCK:
        key = (bits, torch.device(device).type, dtype)
        if key not in _CHOICES:
            _CHOICES[key] = _kept(key) or _measured_once(key, device)
        return _CHOICES[key]


def _measured_once(key: tuple, device) -> tuple[str, str]:
    """Measured by one process at a time: another one timing the kernels at once would load the machine this one
    times on (and the choice is kept for both)."""
    from .. import machine

    with machine.one_process_at_a_time(_record_path(key)):
        return _kept(key) or _measure(key[0], device, key[2])


def _name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _record_path(key: tuple):
    from .. import machine

    bits, device_type, dtype = key
    name = machine.fingerprint("lowbit-choice", CHOICE_VERSION, bits, device_type, _name(dtype),
                               torch.version.cuda if device_type == "cuda" else "", _candidates(bits, device_type))
    return machine.cache_root() / "kernels" / f"lowbit-{name}.json"


def _kept(key: tuple) -> tuple[str, str] | None:
    """The choice measured before on this machine, or None."""
    import json

    try:
        family, why = json.loads(_record_path(key).read_text())
    except (OSError, ValueError, TypeError):
        return None
    return (family, f"{why}; measured once on this machine") if family in _candidates(*key[:2]) + ("dense",) else None


def _candidates(bits: str, device_type: str) -> tuple[str, ...]:
    """The low-bit kernels that compete for ``bits`` here, the preferred first: ``engine.q4_vnni``'s and torch's for
    int4 on a CPU where the former loads, else torch's alone. Part of the kept choice's key, so a process with the
    VNNI kernel turned off (``EXPLORER_Q4_VNNI=0``) neither reads nor overwrites the choice made with it."""
    from . import q4_vnni

    if bits == "int4" and device_type == "cpu" and q4_vnni.load() is None:
        return "int4x8", "int4"
    return (bits,)


def _keep(key: tuple, choice: tuple[str, str]) -> None:
    import json

    path = _record_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(list(choice)))
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only cache: measured again in the next process


def _measure(bits: str, device: torch.device, dtype: torch.dtype) -> tuple[str, str]:
    """Time the low-bit kernels that run and agree here against the plain product, interleaved, ``ROUNDS`` times.
    For int4 on a CPU two kernels compete: ``engine.q4_vnni``'s (int4x8) first, torch's only where it was clearly
    faster in every round; then "dense" only where it beat the chosen one in every round."""
    from ..pace import PACE_TOLERANCE, probe_ms

    dense = f"de-quantised to {_name(dtype)}"
    device = torch.device(device)
    if device.type not in ("cpu", "cuda"):
        return "dense", f"{dense} (no {bits} kernel on {device.type} here)"
    o, i = PROBE_SHAPE
    generator = torch.Generator().manual_seed(0)
    weight = (torch.randn(o, i, generator=generator) * i ** -0.5).to(device)
    x = torch.randn(1, i, generator=generator).to(device, dtype)
    expected = x.float() @ _probe_dense(bits, weight).T
    kernels, refused = {}, []
    for family in _candidates(bits, device.type):
        try:
            kernel = LowBitLinear(family, rounded_tensors(family, weight, dtype), o, i, None, dtype, "")
            if float((kernel(x).float() - expected).abs().max()) > 0.1:
                refused.append(f"the {KERNEL_WORDS[family]} disagreed with the plain product here")
            else:
                kernels[family] = kernel
        except (RuntimeError, NotImplementedError, AttributeError) as err:
            refused.append(f"no {KERNEL_WORDS[family]} here: {str(err).splitlines()[0][:60]}")
    if not kernels:
        return "dense", f"{dense} ({refused[-1]})"
    plain = weight.to(dtype)
    names = list(kernels)
    paces, rounds = [probe_ms()], []
    for _ in range(ROUNDS):
        rounds.append(_best_s(*(lambda k=k: k(x) for k in kernels.values()), lambda: F.linear(x, plain)))
        paces.append(probe_ms())
    quiet = max(paces) <= min(paces) * PACE_TOLERANCE
    chosen = 1 if len(names) > 1 and all(r[1] < r[0] * CLEARLY_FASTER for r in rounds) else 0
    family = names[chosen]
    low_s, plain_s = min(r[chosen] for r in rounds), min(r[-1] for r in rounds)
    key = (bits, device.type, dtype)
    if all(r[-1] < r[chosen] * CLEARLY_FASTER for r in rounds):
        if not quiet:  # a loaded machine's timing decides nothing for good: the kernel, measured again next time
            return family, f"{KERNEL_WORDS[family]} (the machine was busy while it was timed: kept for now)"
        choice = "dense", (f"{dense} (the {KERNEL_WORDS[family]} was slower here: {low_s * 1e6:.0f} µs against "
                           f"{plain_s * 1e6:.0f})")
    else:
        other = "".join(f"; {KERNEL_WORDS[n]} {min(r[k] for r in rounds) / low_s:.1f}× its time"
                        for k, n in enumerate(names) if k != chosen)
        choice = family, f"{KERNEL_WORDS[family]} ({plain_s / low_s:.1f}× a {_name(dtype)} product{other} here)"
    if quiet:
        _keep(key, choice)
    return choice


def _probe_dense(bits: str, weight: torch.Tensor) -> torch.Tensor:
    if bits == "int4":
        return Int4Blocks.rounded(weight).dense()
    codes, scales = int8_rows(weight)
    return codes.float() * scales[:, None]


def _best_s(*calls, repeats: int = 25) -> list[float]:
    """Each call's fastest time of ``repeats``, the calls interleaved (tens of microseconds each: ≈ 10 ms in
    all). The fastest, not the median: on a busy machine (other visitors, a test run) most timings of a
    small product wait for a core, and the median once picked the slower kernel at 8 ms against 8 ms."""
    best = [float("inf")] * len(calls)
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)  # a GPU runs asynchronously
    with torch.inference_mode():
        for call in calls:
            for _ in range(3):
                call()
        for _ in range(repeats):
            for i, call in enumerate(calls):
                sync()
                start = time.perf_counter()
                call()
                sync()
                best[i] = min(best[i], time.perf_counter() - start)
    return best
