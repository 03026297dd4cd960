"""The 4-bit copy's own product kernel: Q4_1 weights × activations rounded to int8 twice per group of 32 (the
rounding, then what it left: ~15 bits), on AVX-512 VNNI (``q4_vnni.cpp``, registered as
``torch.ops.explorer_q4.gemm``).

Why: the copy's step is a pass over its weights, and torch's int4 kernel for the CPU streamed them at about half
the machine's read bandwidth (``explorer profile``: the products were two thirds of the step). This kernel keeps 16
output rows in one register, a lane each, so a byte of codes costs a few instructions (#49).

How it gets here: built from its source once per machine with the C++ compiler inductor uses (``$CXX`` or g++;
≈ 10 s on 2 cores here), kept under ``$EXPLORER_CACHE/kernels/`` keyed by ``machine.fingerprint`` and the source,
and loaded into each process. Where the CPU lacks AVX-512 VNNI, there is no compiler or the build fails, ``load``
says why in a few words and ``engine.lowbit`` keeps torch's kernels; nothing else changes.

The same library holds ``torch.ops.explorer_q4.step``: a one-token step of the whole copy in one call, from the
token's embedding row through every layer (this kernel's products, the layer's bf16 roundings) to the
``ShortlistHead``'s logits (``engine.lowbit_decoder`` calls it), since between the compiled layer's 30 calls a step
spent about as long as in its products, and the head and the cache's bookkeeping in Python another ≈ 1 ms.

Its numerics differ from the copy's other kernels by the activations' roundings (the weights are the same codes):
the copy is a draft, so its agreement with the target is what counts (measured, ``docs/measurements.md``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("q4_vnni.cpp")
FLAGS = ("avx512f", "avx512bw", "avx512vl", "avx512_vnni", "f16c", "fma")  # what the source's intrinsics need
BUILD_TIMEOUT_S = 240  # a cold build took ≈ 10 s on 2 cores here
_LOCK = threading.Lock()
_LOADED: dict[str, str | None] = {}  # "why": None once loaded, else the reason; decided once per process


def load() -> str | None:
    """None where ``torch.ops.explorer_q4.gemm`` runs here (built or read back, once per process), else why not, in a
    few words. ``EXPLORER_Q4_VNNI=0`` is read on every call: a process can turn the kernel off for a while."""
    if os.environ.get("EXPLORER_Q4_VNNI", "1").strip().lower() in ("0", "false", "no", "off"):
        return "EXPLORER_Q4_VNNI=0"
    with _LOCK:  # one build and one registration of the op, whichever thread asks first
        if "why" not in _LOADED:
            _LOADED["why"] = _load()
        return _LOADED["why"]


def _load() -> str | None:
    """Check the CPU, build the library if this machine has none, load it and register its shape function."""
    from .. import machine

    flags = machine.cpu_flags()
    missing = [f for f in FLAGS if f not in flags]
    if missing:
        return f"this CPU lacks {', '.join(missing)}"
    path = library_path()
    try:
        if not path.exists():
            with machine.one_process_at_a_time(path):  # another process building it: wait, then load what it built
                if not path.exists():
                    _build(path)
        torch.ops.load_library(str(path))
        torch.library.register_fake("explorer_q4::gemm")(_shape)
    except (OSError, RuntimeError, subprocess.SubprocessError) as err:
        return str(err).splitlines()[0][:120] if str(err) else type(err).__name__
    return None


def library_path() -> Path:
    from .. import machine

    source = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return machine.cache_root() / "kernels" / f"q4-vnni-{machine.fingerprint('q4-vnni', source)}.so"


def pack(codes: torch.Tensor, scale: torch.Tensor, minimum: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_1 blocks (codes (O, I) in 0–15, scale and minimum (O, I/32)) in the kernel's layout: codes
    (O/16, I/8, 64) uint8, for 16 output rows and 8 inputs each row's 4 bytes, byte b holding input b in its low
    nibble and input 4 + b in its high one; and d, m (O/16, I/32, 2, 16) float16."""
    o, i = codes.shape
    c = codes.to(torch.uint8).view(o // 16, 16, i // 8, 2, 4)
    paired = c[..., 0, :] | (c[..., 1, :] << 4)  # (O/16, 16, I/8, 4)
    packed = paired.permute(0, 2, 1, 3).contiguous().view(o // 16, i // 8, 64)
    g = i // 32
    dm = torch.stack([scale.view(o // 16, 16, g), minimum.view(o // 16, 16, g)], dim=1)  # (O/16, 2, 16, G)
    return packed, dm.permute(0, 3, 1, 2).to(torch.float16).contiguous()  # (O/16, G, 2, 16)


def _shape(x: torch.Tensor, codes: torch.Tensor, dm: torch.Tensor) -> torch.Tensor:
    """What the kernel returns, for tracing (the compiled layer): (R, O) in x's dtype, R symbolic."""
    return x.new_empty(x.shape[0], codes.shape[0] * 16)


def _build(path: Path) -> None:
    """Compile ``SOURCE`` into ``path`` (through a temporary name: a half-written library is never loaded)."""
    from torch.utils import cpp_extension

    from .kernels import say

    compiler = os.environ.get("CXX") or "g++"
    if shutil.which(compiler) is None:
        raise RuntimeError(f"no C++ compiler ({compiler})")
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    command = [compiler, "-O3", "-std=c++20", "-shared", "-fPIC", "-fopenmp", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
               *(f"-m{f.replace('_', '')}" for f in FLAGS), str(SOURCE), "-o", str(temporary)]
    command += [f"-I{p}" for p in cpp_extension.include_paths()]
    command += [f"-L{p}" for p in cpp_extension.library_paths()] + ["-lc10", "-ltorch_cpu"]
    command += [f"-Wl,-rpath,{p}" for p in cpp_extension.library_paths()]
    say(f"Building the 4-bit copy's VNNI kernel for this CPU once (≈ 10 s on 2 cores; kept in {path.parent}) …")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"building the kernel took over {BUILD_TIMEOUT_S} s") from None
    if done.returncode != 0 or not temporary.exists():
        said = (done.stderr or "").splitlines()
        lines = [line for line in said if "error" in line] or said
        raise RuntimeError(f"the kernel did not build ({lines[0][:100] if lines else done.returncode})")
    os.replace(temporary, path)
