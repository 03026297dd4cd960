"""The decoder layer compiled for this machine: the Python taken out of a forward. This module is the policy
(whether a layer is compiled), the cache of artifacts and their build, load and check.

Why: a one-token forward of the default model on the CPU fast path makes ≈ 35 small calls a layer (norms,
rotary, splits, the KV write, SDPA, residual adds) around its 4 matrix products; on a 2-core machine each
costs 5–50 µs of Python and dispatch, ≈ 10 ms a forward, a quarter of it (``explorer profile``).

How: ``engine.layer_maths.llama_layer`` is one Llama decoder layer as a pure function of tensors; a child
process (``engine.compile_child``) traces it with symbolic sizes and compiles it with inductor, once per
machine, with a time limit (``COMPILE_TIMEOUT_S``; inductor needs a C++ compiler: gcc here). The artifact is
kept under ``$EXPLORER_CACHE/compiled/`` keyed by ``machine.fingerprint`` (a kernel built for one CPU's vector
units must not run on another), the code that makes it (``source_key``) and the layer's shape, and each later
process loads it (≈ 1–3 s). Loaded, it is checked against the eager function on random inputs before it is
used. Anything that fails — no compiler, a timeout, a check that disagrees, an unsupported layer — leaves the
eager fast path in place and says why (``status()``; ``explorer profile`` prints it). ``EXPLORER_COMPILE=0``
turns it off; by default a model of tiny layers is left eager (``worth_it``), ``EXPLORER_COMPILE=1`` compiles
those too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import torch

from .. import machine
from ..errors import one_line
from . import compile_child, layer_maths, lowbit, q4_vnni
from .compile_child import checked, first_output
from .kernels import say
from .switches import ThreadSwitch
from .layer_maths import LayerShape
from .layer_maths import rotate_half  # noqa: F401 — importable from here (``engine.cuda_graphs`` reads it here)

MIN_LAYER_WEIGHTS = 10**6  # "auto" compiles layers from this size (SmolLM2-135M's: 3.5 M weights)
COMPILE_TIMEOUT_S = 300  # a cold compile took 8–25 s on 2 cores here; past this the eager path stays


_LOCK = threading.Lock()
_STEPS: dict[LayerShape, Callable | None] = {}
_STATUS: dict[LayerShape, str] = {}
_BUILT_BESIDE: dict[LayerShape, float] = {}  # built by ``build_missing`` this process: the seconds it took
_PAUSED = ThreadSwitch()  # per thread: ``eager()`` turns compiled layers off for comparisons


def mode() -> str:
    """``EXPLORER_COMPILE``: "auto" (the default: layers big enough to pay for loading the compiler's runtime,
    ``MIN_LAYER_WEIGHTS``), "1" (every layer the fast path fuses: what the tests of tiny models use) or "0"."""
    value = os.environ.get("EXPLORER_COMPILE", "auto").strip().lower()
    return "0" if value in ("0", "false", "no", "off") else "1" if value in ("1", "true", "yes", "on") else "auto"


def enabled() -> bool:
    return mode() != "0"


def worth_it(shape: "LayerShape") -> bool:
    """Whether ``shape``'s layer is compiled under the current mode. Loading a compiled layer costs a process
    3–5 s once (inductor's runtime); it saves ≈ 0.4 ms a layer per forward, so a model of tiny layers (the
    tests' random ones: a forward of a few ms) decodes eagerly unless ``EXPLORER_COMPILE=1``."""
    weights = shape.hidden * ((shape.heads + 2 * shape.kv_heads) * shape.head_dim + 3 * shape.inner) \
        + shape.heads * shape.head_dim * shape.hidden
    return mode() == "1" or (mode() == "auto" and weights >= MIN_LAYER_WEIGHTS)


def paused() -> bool:
    return _PAUSED.on()


def eager():
    """Run the eager fast path inside this block (``explorer profile`` compares the two)."""
    return _PAUSED.block()


def status() -> dict[str, str]:
    """Each layer shape's state in words ("compiled now in 9.8 s", "compiled, loaded in 1.2 s", "eager: …")."""
    return {f"H{s.hidden}/I{s.inner}/{s.dtype}/{_form(s)}": text for s, text in _STATUS.items()}


def _form(shape: LayerShape) -> str:
    """The kernel family, and how a low-bit copy's short steps attend where they differ from the rest."""
    return shape.family + (" rows" if shape.attention == "rows" else "")


def source_key() -> str:
    """The code that makes the compiled code, and only that: the layer's maths (``layer_maths``), the low-bit
    kernel calls it traces (``lowbit.multiply``, with the VNNI kernel's shape function) and what the child runs to
    trace, compile and check it (its example sizes and arguments, inductor's options: ``compile_child``). An edit to
    one of them makes a new artifact; an edit to this module (the policy, the cache, the build's time limit) keeps
    every artifact."""
    digest = hashlib.sha256()
    for part in (Path(layer_maths.__file__).read_bytes(), inspect.getsource(lowbit.multiply).encode(),
                 inspect.getsource(q4_vnni._shape).encode(), Path(compile_child.__file__).read_bytes()):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:12]


def artifact_path(shape: LayerShape) -> Path:
    key = machine.fingerprint("llama-layer", dataclasses.astuple(shape), source_key())
    return machine.cache_root() / "compiled" / f"llama-layer-{key}"


def layer_step(shape: LayerShape) -> Callable | None:
    """The compiled layer for ``shape`` — built once per machine, loaded once per process — or None (the
    eager path), with the reason in ``status()``."""
    if not worth_it(shape):
        return None
    with _LOCK:
        if shape not in _STEPS:
            _STEPS[shape] = _prepare(shape)
        return _STEPS[shape]


def _prepare(shape: LayerShape) -> Callable | None:
    path = artifact_path(shape)
    failed = path.with_suffix(".failed")
    if failed.exists():
        _STATUS[shape] = f"eager: compiling failed before on this machine ({failed.read_text()[:200]}); " \
                         f"delete {failed} to try again"
        return None
    start = time.perf_counter()
    beside = _BUILT_BESIDE.pop(shape, None)  # the seconds its build took beside the others (``build_missing``)
    built = beside is not None
    try:
        built = _build_once(shape, path) or built
        from torch._inductor import CompiledArtifact

        artifact = CompiledArtifact.load(path=str(path), format="binary")
        try:
            step = checked(shape, _direct(artifact))
        except Exception:  # noqa: BLE001 — the inner call moved in this torch: the public one, checked
            step = checked(shape, lambda *args: first_output(artifact(*args)))
    except Exception as err:  # noqa: BLE001 — any failure leaves the eager path, with its reason
        reason = one_line(err, 200)
        _STATUS[shape] = f"eager: the compiled layer is unavailable ({reason})"
        if built or not path.exists():
            _remember_failure(path, reason)
        say(f"note: the decoder layer runs eagerly ({reason})")
        return None
    seconds = time.perf_counter() - start + (beside or 0.0)
    _STATUS[shape] = f"compiled now in {seconds:.1f} s" if built else f"compiled, loaded in {seconds:.1f} s"
    return step


def build_missing(shapes: list[LayerShape]) -> None:
    """Build the artifacts of ``shapes`` that this machine lacks, each in its own child, all at once.

    A model's first forward needs two (MKL's dense weights for one row, oneDNN's packed ones for more); each
    build is mostly one core's work (tracing, then one g++), 2 × ≈ 8 s one after the other here. A failure
    leaves that shape eager and says why, as ``layer_step``'s own build does; one shape is left to it whole."""
    todo = [shape for shape in dict.fromkeys(shapes) if worth_it(shape) and shape not in _STEPS
            and not artifact_path(shape).exists() and not artifact_path(shape).with_suffix(".failed").exists()]
    if len(todo) < 2:
        return
    say(f"Compiling the decoder layer's {len(todo)} forms ({', '.join(_form(shape) for shape in todo)}) for this "
        f"CPU once, side by side (≈ 10–30 s on 2 cores; kept in {artifact_path(todo[0]).parent}) …")
    with ThreadPoolExecutor(len(todo)) as pool:
        list(pool.map(_build_beside, todo))


def _build_beside(shape: LayerShape) -> None:
    path, start = artifact_path(shape), time.perf_counter()
    try:
        if _build_once(shape, path, quiet=True):
            _BUILT_BESIDE[shape] = time.perf_counter() - start
    except Exception as err:  # noqa: BLE001 — as in ``_prepare``: the eager path, with its reason
        reason = one_line(err, 200)
        _remember_failure(path, reason)
        _STATUS[shape] = f"eager: the compiled layer is unavailable ({reason})"
        _STEPS[shape] = None
        say(f"note: the decoder layer runs eagerly ({reason})")


def _build_once(shape: LayerShape, path: Path, quiet: bool = False) -> bool:
    """Build ``path`` unless it is there (looked for again inside the machine-wide lock: another process
    compiling it is waited for, then its artifact is loaded); whether this call built it."""
    if path.exists():
        return False
    with machine.one_process_at_a_time(path):
        if path.exists():
            return False
        if not quiet:
            say(f"Compiling the decoder layer ({_form(shape)}) for this CPU once "
                f"(≈ 10–30 s on 2 cores; kept in {path.parent}) …")
        _build_in_child(shape, path)
        return True


def _remember_failure(path: Path, reason: str) -> None:
    try:
        failed = path.with_suffix(".failed")
        failed.parent.mkdir(parents=True, exist_ok=True)
        failed.write_text(reason)
    except OSError:
        pass


def _direct(artifact) -> Callable:
    """The generated code's own entry point inside a loaded artifact, without the four Python wrappers
    around it (≈ 25 µs a call here, 30 calls a forward). The wrappers handle what this graph does not have:
    gradients, tensor subclasses, outputs aliasing inputs; the cache writes are in-place in the kernels.
    Found by walking the wrapper's closures (torch 2.13); another torch that hides it raises here and the
    public call is used (``_prepare``)."""
    from torch._inductor.output_code import CompiledFxGraph

    seen, todo = set(), [artifact._compiled_fn]
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        if isinstance(fn, CompiledFxGraph):
            inner = fn.current_callable
            return lambda *args: first_output(inner(list(args)))
        todo += [cell.cell_contents for cell in (getattr(fn, "__closure__", None) or ()) if callable(cell.cell_contents)]
    raise RuntimeError("no compiled graph inside the artifact")


def _build_in_child(shape: LayerShape, path: Path) -> None:
    """Trace and compile in a child process with a time limit: a compiler that hangs or a machine too slow
    costs at most ``COMPILE_TIMEOUT_S``, and inductor's memory goes with the child."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    try:
        done = subprocess.run([sys.executable, "-c", "from explorer.engine.compile_child import main; main()",
                               json.dumps(dataclasses.asdict(shape)), str(path)],
                              env=env, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"compiling took over {COMPILE_TIMEOUT_S} s") from None
    if done.returncode != 0 or not path.exists():
        lines = [line for line in (done.stderr or "").splitlines() if line.strip()]
        raise RuntimeError(lines[-1] if lines else f"the compiler exited with {done.returncode}")
