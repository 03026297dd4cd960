"""Which matrix kernel each linear layer runs, per number of rows, chosen by measuring this machine.

Why: on one 2-core machine of this project's kind MKL's one-row product was slow and oneDNN's packed kernel
won everywhere (a forward's linears for 1 token: 46.8 → 30.6 ms); on another CPU of the same kind MKL's
one-row path was the faster one (the model's own forward 30.9 ms against 34.5 on the packed path), and the
packed path lost plain decoding 5 % against HF ``generate``. No choice made on one CPU holds on all, so the
explorer measures the machine it runs on, once, and keeps the answer.

What is measured: every linear of the model in the order a forward runs them (so their weights stream from
memory as they do in decoding, not from a warm cache), for each row count decoding uses — one token (plain
decoding, draft steps), 2–8 (verification of a draft), 9–64 (token trees, prefill chunks) — through each
candidate kernel, the candidates interleaved so a slow spell of the machine hits them all alike; per row
bucket the fastest wins. Candidates:

    mkl        the model's own ``nn.Linear`` product (MKL on x86)
    onednn-1   oneDNN's linear over the weight reordered once into its blocked layout for 1 row
    onednn-8   the same laid out for 8 rows (what one-row calls pay little for, verification much less)

The choice is kept under ``$EXPLORER_CACHE/kernels/``, keyed by ``machine.fingerprint`` (CPU model and flags,
cores, torch and Python versions), the model's shapes and the dtype, so it is measured once per machine and
found again by every later process. ``EXPLORER_KERNELS`` forces one (``mkl``, ``onednn-1``, ``onednn-8``, or
per bucket ``1=mkl,2-8=onednn-8,9-64=onednn-8``) for comparisons; ``auto`` (the default) measures. The
kernels compute the same products up to float rounding (the lossless tests hold on every choice).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import statistics
import time
from typing import Callable, Sequence

import torch

from .. import machine
from ..errors import ExplorerError
from ..notices import announce

KINDS = ("mkl", "onednn-1", "onednn-8")
PACKED_ROWS = {"onednn-1": 1, "onednn-8": 8}  # the row count each packed layout is laid out for
BUCKETS = ("1", "2-8", "9-64")  # more than 64 rows run the last bucket's kernel
PROBE_ROWS = {"1": (1,), "2-8": (2, 8), "9-64": (16, 48)}  # what each bucket is timed at (summed)
BUDGET_S = 5.0  # timing stops adding repeats past this: with the packing (≈ 3 s here) under 10 s once
MIN_REPEATS, MAX_REPEATS = 3, 9
SIMPLER_WITHIN = 0.03  # a kernel another bucket already uses wins a bucket if within 3 % (one layout less in memory)
VERSION = 1  # of the cached record; another version is measured again


def bucket(rows: int) -> int:
    """The index into ``BUCKETS`` of a call with ``rows`` rows."""
    return 0 if rows <= 1 else 1 if rows <= 8 else 2


@dataclasses.dataclass(frozen=True)
class KernelChoice:
    """The kernel per row bucket, how it was decided and what was measured (ms of one forward's linears
    per bucket and kernel; empty when it was forced)."""

    kinds: tuple[str, str, str]
    how: str  # "measured" | "cached" | "forced" | "only"
    ms: dict = dataclasses.field(default_factory=dict)
    seconds: float = 0.0  # what measuring took
    measured_at: str | None = None

    def __post_init__(self):
        if len(self.kinds) != len(BUCKETS) or any(k not in KINDS for k in self.kinds):
            raise ValueError(f"a kernel choice names one of {KINDS} per bucket {BUCKETS}, not {self.kinds}")

    def kind(self, rows: int) -> str:
        return self.kinds[bucket(rows)]

    def words(self) -> str:
        """"1 row: onednn-8 (30.6 ms; mkl 46.8, onednn-1 30.9); 2–8 rows: …" — each bucket's winner with
        what it beat (a forward's linears), and how the choice was made."""
        parts = []
        for label, kind in zip(BUCKETS, self.kinds):
            row = self.ms.get(label) or {}
            shown = label.replace("-", "–") + (" row" if label == "1" else " rows")
            if kind in row:
                others = ", ".join(f"{k} {v:.1f}" for k, v in row.items() if k != kind)
                parts.append(f"{shown}: {kind} ({row[kind]:.1f} ms" + (f"; {others}" if others else "") + ")")
            else:
                parts.append(f"{shown}: {kind}")
        how = {"measured": f"measured on this machine in {self.seconds:.1f} s",
               "cached": f"measured on this machine{' on ' + self.measured_at[:10] if self.measured_at else ''}",
               "forced": "forced by EXPLORER_KERNELS",
               "only": "the only kernel for this dtype here"}.get(self.how, self.how)
        return "; ".join(parts) + f" ({how})"

    def record(self) -> dict:
        """What a report or a trace keeps of it."""
        return {"kinds": dict(zip(BUCKETS, self.kinds)), "how": self.how, "ms": self.ms}


def available(dtype: torch.dtype) -> tuple[str, ...]:
    """The kernels this torch and CPU run for weights of ``dtype`` (oneDNN's packed bf16 needs AVX-512 or
    AVX-NE-CONVERT: without them only MKL's product is offered)."""
    try:
        onednn = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise") \
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
        if dtype == torch.bfloat16:
            onednn = onednn and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    except (AttributeError, RuntimeError):
        onednn = False
    return KINDS if onednn and dtype in (torch.float32, torch.bfloat16) else ("mkl",)


def forced() -> KernelChoice | None:
    """``EXPLORER_KERNELS`` as a choice; None for ``auto`` (or unset). A value that is not a choice is refused
    in one line (a typo would otherwise silently measure)."""
    value = os.environ.get("EXPLORER_KERNELS", "auto").strip().lower()
    if value in ("", "auto"):
        return None
    if value in KINDS:
        return KernelChoice((value,) * len(BUCKETS), "forced")
    kinds = {}
    for part in value.split(","):
        label, _, kind = part.strip().partition("=")
        if label.strip() not in BUCKETS or kind.strip() not in KINDS:
            kinds = None
            break
        kinds[label.strip()] = kind.strip()
    if not kinds or set(kinds) != set(BUCKETS):
        raise ExplorerError(f"EXPLORER_KERNELS={value[:60]!r} is not a kernel choice: use auto, one of "
                            f"{', '.join(KINDS)}, or one per row bucket, e.g. 1=mkl,2-8=onednn-8,9-64=onednn-8")
    return KernelChoice(tuple(kinds[label] for label in BUCKETS), "forced")


def cache_path(signature: str, dtype: torch.dtype):
    return machine.cache_root() / "kernels" / f"{machine.fingerprint(signature, dtype, VERSION)}.json"


def read_cached(signature: str, dtype: torch.dtype) -> KernelChoice | None:
    """The choice measured on this machine before, if its file is there and well formed."""
    try:
        record = json.loads(cache_path(signature, dtype).read_text(encoding="utf-8"))
        kinds = tuple(record["kinds"])
        ms = {str(b): {str(k): float(v) for k, v in row.items() if k in KINDS}
              for b, row in record.get("ms", {}).items() if b in BUCKETS}
        return KernelChoice(kinds, "cached", ms, float(record.get("seconds", 0.0)), str(record.get("measured_at", ""))[:32])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_cached(signature: str, dtype: torch.dtype, choice: KernelChoice) -> None:
    """Keep a measured choice (a failure to write only costs a measurement next time)."""
    path = cache_path(signature, dtype)
    record = {"kinds": list(choice.kinds), "ms": choice.ms, "seconds": choice.seconds, "measured_at": choice.measured_at,
              "machine": machine.describe(), "model": signature, "dtype": str(dtype).replace("torch.", ""),
              "version": VERSION}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(record, indent=1), encoding="utf-8")
        temporary.replace(path)
    except OSError:
        pass


def measure(linears: Sequence, candidates: Sequence[str], budget_s: float = BUDGET_S,
            progress: Callable[[str], None] | None = None) -> KernelChoice:
    """Time one forward's ``linears`` (objects with ``in_features`` and ``run(kind, x)``, in forward order)
    through each candidate kernel at each bucket's probe rows; the fastest per bucket wins (see the module
    docstring). Bounded: repeats stop being added once ``budget_s`` is spent (at least ``MIN_REPEATS``)."""
    start = time.perf_counter()
    inputs = {(rows, width): torch.randn(rows, width, dtype=linears[0].dtype, generator=torch.Generator().manual_seed(rows))
              for rows in {r for rs in PROBE_ROWS.values() for r in rs} for width in {lin.in_features for lin in linears}}
    times: dict[tuple[str, int], list[float]] = {(kind, rows): [] for kind in candidates
                                                for rs in PROBE_ROWS.values() for rows in rs}

    def one_forward(kind: str, rows: int) -> float:
        t0 = time.perf_counter()
        for lin in linears:
            lin.run(kind, inputs[(rows, lin.in_features)])
        return time.perf_counter() - t0

    with torch.inference_mode():
        for kind in candidates:  # a warm-up pass: first calls of a shape allocate
            for rows in (1, 8):
                one_forward(kind, rows)
        for repeat in range(MAX_REPEATS):
            if repeat >= MIN_REPEATS and time.perf_counter() - start > budget_s:
                break
            for rs in PROBE_ROWS.values():
                for rows in rs:
                    for kind in candidates[repeat % len(candidates):] + candidates[:repeat % len(candidates)]:
                        times[(kind, rows)].append(one_forward(kind, rows))
            if progress and time.perf_counter() - start > 2.0:  # a line for a measurement one notices
                progress(f"  timing kernels: pass {repeat + 1} ({time.perf_counter() - start:.1f} s)")
    ms = {label: {kind: round(sum(statistics.median(times[(kind, r)]) for r in rows) * 1e3, 2) for kind in candidates}
          for label, rows in PROBE_ROWS.items()}
    return KernelChoice(decide(ms), "measured", ms, round(time.perf_counter() - start, 2),
                        datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))


def decide(ms: dict[str, dict[str, float]]) -> tuple[str, ...]:
    """Per bucket the fastest kernel, except that a kernel another bucket already runs wins a bucket where it
    is within ``SIMPLER_WITHIN`` of the fastest: one packed layout less in memory (≈ 540 MB for the default
    model) for a difference inside the machine's noise."""
    kinds = [min(ms[label], key=ms[label].get) for label in BUCKETS]
    for i, label in enumerate(BUCKETS):
        for other in kinds[:i] + kinds[i + 1:]:
            if other != kinds[i] and ms[label][other] <= ms[label][kinds[i]] * (1 + SIMPLER_WITHIN):
                kinds[i] = other
                break
    return tuple(kinds)


def say(line: str) -> None:
    """A progress line of the one-time work (stderr: the CLI's output and the page stay clean; a page waiting for
    a run shows it too: ``explorer.notices``)."""
    announce(line)
