"""This machine, for every figure that depends on it, and where the explorer keeps its files.

CPUs of one cloud machine kind differ: on two 2-core machines of this project's kind a one-token forward
of the default model cost 30.9 ms on one (Intel Xeon, AMX, 480 MB L3) and 77.8 ms on the other, and the
kernel that won on one lost on the other (docs/measurements.md, "Speed on every CPU"). So a speed figure means nothing
without the CPU model, its cores and cache, its vector units, the torch version and the dtype, and every
bench, race, profile and report records ``describe()``. ``fingerprint()`` keys what is measured or compiled
once per machine (the kernel choice, the compiled decoder layer) under ``cache_root()``.

A leaf: imports nothing of the project; reads ``/proc/cpuinfo`` and ``/sys`` where they exist (Linux) and
says less, never wrong, elsewhere.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import platform
import time
from pathlib import Path

# the vector and matrix units that change which kernels win (the names /proc/cpuinfo gives them)
UNITS = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX-512 bf16"), ("avx512f", "AVX-512"), ("avx2", "AVX2"))


def cache_root() -> Path:
    """Where the explorer keeps what it makes once: converted models, the trainers' data, this machine's
    kernel choice and compiled layers: ``$EXPLORER_CACHE`` or ``~/.cache/spec-explorer``."""
    return Path(os.environ.get("EXPLORER_CACHE") or Path.home() / ".cache" / "spec-explorer")


@contextlib.contextmanager
def one_process_at_a_time(path: Path):
    """Hold an exclusive lock beside ``path`` (``<path>.lock``, where ``fcntl`` exists) while making what is kept
    there once per machine: two processes started at once on an empty cache (two pytest workers, two app workers)
    make it once, the second waiting for the first instead of making it beside it at half speed (and timing kernels,
    or compiling against a time limit, on a machine the other one keeps busy). The caller looks again inside the
    lock. Where the lock cannot be taken (Windows, a read-only cache) each makes its own; their writes go through
    a temporary name, so one whole copy is kept."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_name(path.name + ".lock"), "a")
    except OSError:  # a read-only cache
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def _cache_sizes() -> dict[str, str]:
    """{"L2": "512K", "L3": "32768K"} per core's view (/sys; {} where it cannot be read)."""
    sizes = {}
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(root.glob("index*")) if root.is_dir() else []:
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if kind in ("Unified", "Data") and level in ("2", "3"):
            sizes[f"L{level}"] = size
    return sizes


def _megabytes(size: str) -> str:
    """'32768K' -> '32 MB', '512K' -> '0.5 MB'."""
    try:
        if size.endswith("K"):
            mb = int(size[:-1]) / 1024
        elif size.endswith("M"):
            mb = float(size[:-1])
        else:
            return size
    except ValueError:
        return size
    return f"{mb:g} MB"


def cpu_flags() -> frozenset[str]:
    """The first processor's feature flags, as /proc/cpuinfo names them (empty where there is none)."""
    return frozenset(_cpuinfo().get("flags", "").split())


def cores() -> int:
    """The cores this process may run on (a container's share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@functools.lru_cache(maxsize=1)
def describe() -> dict[str, object]:
    """This machine's CPU as a record: model, cores, L2 and L3 per core's view, the units that change which
    kernels win, the torch version, torch's threads (read once per process)."""
    import torch  # here, not at import: the leaves import no heavy library at import time

    info = _cpuinfo()
    flags = cpu_flags()
    caches = _cache_sizes()
    return {
        "cpu": info.get("model name") or platform.processor() or platform.machine() or "unknown CPU",
        "cores": cores(),
        "l2": _megabytes(caches["L2"]) if "L2" in caches else None,
        "l3": _megabytes(caches["L3"]) if "L3" in caches else None,
        "units": [name for flag, name in UNITS if flag in flags],
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def read_bandwidth(megabytes: int = 256, repeats: int = 5) -> float:
    """Bytes a second this machine's threads read an array of ``megabytes`` again and again, now: the fastest of
    ``repeats`` sums over it, as decode steps read the same weights step after step. Larger than the last-level
    cache, it streams from memory (the default, 8× a 32 MB L3); where it fits, it is read from the cache, as the
    same weights then are (an Intel Xeon with 300 MB of L3 read 84 MB at 58–60 GB/s and 256 MB at 31). What a
    step's time is weighed against: a step that reads B bytes, again and again, cannot take less than B / this
    measured at B."""
    import torch

    data = torch.ones(megabytes * 2**20 // 4)
    data.sum()  # pages touched, threads awake
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - start)
    return data.numel() * 4 / best


def words(record: dict | None = None, dtype: str | None = None) -> str:
    """A machine record (``describe()`` by default, or one read back from a report) in one line:
    "AMD EPYC, 2 cores, L3 32 MB, AVX2; torch 2.13.0+cpu (2 threads), float32"."""
    m = describe() if record is None else record
    parts = [str(m.get("cpu") or "unknown CPU"), f"{m.get('cores')} cores" if m.get("cores") else None,
             f"L3 {m['l3']}" if m.get("l3") else None]
    units = m.get("units")
    if isinstance(units, list):
        parts.append(" + ".join(str(u) for u in units[:2]) if units else "no AVX2")
    text = ", ".join(p for p in parts if p)
    if m.get("torch"):
        text += f"; torch {m['torch']}" + (f" ({m['threads']} threads)" if m.get("threads") else "")
    return text + (f", {dtype}" if dtype else "")


def fingerprint(*more: object) -> str:
    """A short key for what is valid on this machine only: CPU model, its flags, cores, the torch and Python
    versions, and ``more`` (the model's shape, the dtype, …). Another CPU, a new torch or another container
    size gets a new key, so nothing measured or compiled elsewhere is reused here."""
    import torch

    info = _cpuinfo()
    parts = [info.get("model name", platform.processor()), info.get("flags", ""), str(cores()), torch.__version__,
             platform.python_version(), platform.machine(), *map(str, more)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
