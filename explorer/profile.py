"""What a target forward costs on this machine: T(n) for the model's own forward, the fast path run eagerly
and the fast path with its compiled layer, the kernels chosen and why, and where one forward's time goes
(``python -m explorer profile``).

Leviathan et al.'s Theorem 3.8 prices a verification of γ + 1 tokens like one target step; on a CPU
that holds only as far as T(γ + 1)/T(1) ≈ 1. This measures T(n) the way ``engine.costs`` does (a
``CachedForward`` cut back to a fixed context before each call, the sizes interleaved so a slow spell of
the machine hits them all alike, medians), for every forward side by side in one process.

The split of one forward: the kernels' own time comes from ``torch.profiler`` (the compiled layer's fused
kernels report themselves too), the forward's wall time from a run without the profiler (which slows every
call it records); what is left of the wall time is Python, dispatch and allocation — the share the
compiled layer exists to remove.

No ratio is printed that cannot be (``explorer.ratios``): a T(n)/T(1) below 1 or above about n (#48: "T(16)/T(1) =
0.11"), parts whose shares add up to more than the forward (#48: 277 %, "attention 124 %"); the parts' shares are
those of the profiled forwards' own wall time, since the profiler slows what it records. The machine's pace is
probed before every pass over the sizes, and a table measured while it moved says so.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import statistics
import sys
import tempfile
import time

import torch

from . import machine
from .errors import ExplorerError
from .pace import PACE_TOLERANCE, probe_ms
from .ratios import shares_doubt, verify_ratio_doubt
from .theory import share_of_the_draft_alone
from .engine import compiled, fast
from .engine.cache import CachedForward
from .engine.forward import full_forward
from .engine.lowbit_decoder import layer_by_layer

# torch.profiler event names by part of a decoder forward; compiled kernels are "graph_<n>_cpp_fused_<ops>"
PRODUCTS = ("mkldnn::_linear_pointwise", "aten::addmm", "aten::mm", "aten::addmv", "aten::mv")
ATTENTION = ("aten::bmm", "aten::_scaled_dot_product_flash_attention_for_cpu",
             "aten::_scaled_dot_product_attention_math", "aten::_safe_softmax", "aten::_softmax")
ELEMENTWISE = ("aten::mul", "aten::add", "aten::pow", "aten::mean", "aten::rsqrt", "aten::silu", "aten::neg",
               "aten::cat", "aten::_to_copy", "aten::copy_", "aten::cos", "aten::sin", "aten::rms_norm",
               "aten::_fused_rms_norm", "aten::index_copy_", "aten::embedding", "aten::index_select")
PARTS = ("matrix products (linear layers)", "attention", "norms, rotary, SiLU, residual adds, KV-cache writes")


def own_forward(model: torch.nn.Module):
    """The model's own ``forward`` (its modules as loaded: MKL's kernels on the CPU)."""
    def forward(input_ids, cache, n_logits):
        return model(input_ids=input_ids, past_key_values=cache, use_cache=True, logits_to_keep=n_logits).logits[0]
    return forward


def _ids(target, count: int) -> list[int]:
    return [i % max(2, target.vocab_size - 1) + 1 for i in range(count)]


def _is_compiled(target) -> bool:
    view = fast.fast_view(target.model)
    return any(getattr(m, "compiled_buckets", (False,))[0] for m in view.modules())


def forwards(target) -> dict[str, tuple]:
    """The forwards to compare: (runner, context manager) by name."""
    import contextlib

    out = {"model's own forward": (CachedForward(own_forward(target.model), target.device), contextlib.nullcontext)}
    if fast.fast_view(target.model) is not target.model:
        out["fast path, eager"] = (CachedForward(full_forward(target.model), target.device), compiled.eager)
        if _is_compiled(target):
            out["fast path, compiled"] = (CachedForward(full_forward(target.model), target.device), contextlib.nullcontext)
    return out


def verify_costs(target, sizes=(1, 2, 3, 4, 5, 8, 16), context: int = 128, repeats: int = 15,
                 pace: list | None = None) -> dict[str, dict[int, float]]:
    """Median seconds of one forward of n new tokens after ``context`` cached ones, per forward; ``pace``, when
    given, receives the machine's pace probe (ms) taken before each pass over the sizes."""
    ids = _ids(target, context + max(sizes))
    runners = forwards(target)
    sync = torch.cuda.synchronize if target.device.type == "cuda" else (lambda: None)
    times = {(name, n): [] for name in runners for n in sizes}
    for runner, mode in runners.values():
        with mode():
            runner.logits(ids[:context], 1)
    for rep in range(repeats + 1):  # the first pass is a warm-up
        if pace is not None and rep:
            pace.append(probe_ms())
        for n in sizes:
            for name, (runner, mode) in runners.items():
                with mode():
                    runner.truncate(context)
                    sync()
                    start = time.perf_counter()
                    runner.logits(ids[: context + n], n)
                    sync()
                if rep:
                    times[(name, n)].append(time.perf_counter() - start)
    return {name: {n: statistics.median(times[(name, n)]) for n in sizes} for name in runners}


def _part(name: str) -> str | None:
    if name.startswith("aoti_torch_cpu_"):  # an op the compiled layer's C++ glue calls: aoti_torch_cpu_bmm_out
        name = "aten::" + name[len("aoti_torch_cpu_"):].removesuffix("_out")
    if name in PRODUCTS:
        return PARTS[0]
    if name in ATTENTION or ("cpp_fused" in name and ("softmax" in name or "bmm" in name)):
        return PARTS[1]
    if name in ELEMENTWISE or "cpp_fused" in name:
        return PARTS[2]
    return None


KINETO_LINE = re.compile(rb"^(USDT|STAGE|INFO):\d{4}-\d\d-\d\d .*\n?", re.M)


@contextlib.contextmanager
def _kineto_silenced():
    """Kineto (torch.profiler's engine) writes "USDT: … profiler_start" and "profiler_stop" lines straight to the
    process's stderr at every profiled block (``profile`` printed them among its table, #48; ``KINETO_LOG_LEVEL``
    does not stop them once ``torch._dynamo`` has loaded the profiler). So stderr is caught in a file for the block
    and passed on without those lines: anything else written there still reaches the terminal."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            rest = KINETO_LINE.sub(b"", caught.read())
            if rest:
                sys.stderr.write(rest.decode(errors="replace"))
                sys.stderr.flush()


def breakdown(target, n: int = 1, context: int = 128, repeats: int = 20) -> dict[str, float]:
    """Milliseconds per fast-path forward of ``n`` tokens (compiled where it is) by part (``PARTS``), from
    the kernels' own times under the profiler, as their share of the profiled forwards' wall time (the profiler
    slows every op it records) applied to the wall time without it; the rest as Python, dispatch and allocation;
    that wall time; and ``share``, the parts' own shares added up (above 1 the split cannot be true:
    ``ratios.shares_doubt``). Profiled and unprofiled blocks alternate, so a slow spell of the machine lands on
    both rather than in "the rest"."""
    from torch.profiler import ProfilerActivity, profile

    ids = _ids(target, context + n)
    runner = CachedForward(full_forward(target.model), target.device)
    runner.logits(ids[:context], 1)
    walls, parts, profiled, profiled_s = [], dict.fromkeys(PARTS, 0.0), 0, 0.0
    block = max(1, repeats // 4)
    with _kineto_silenced():
        for rep in range(4):
            for i in range(block + (2 if rep == 0 else 0)):  # two warm-up forwards first
                runner.truncate(context)
                start = time.perf_counter()
                runner.logits(ids, n)
                if rep or i >= 2:
                    walls.append(time.perf_counter() - start)
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                start = time.perf_counter()
                for _ in range(block):
                    runner.truncate(context)
                    runner.logits(ids, n)
                profiled_s += time.perf_counter() - start
            profiled += block
            for event in prof.key_averages():
                part = _part(event.key)
                if part is not None:
                    parts[part] += event.self_cpu_time_total / 1e3
    shares = {part: ms / (profiled_s * 1e3) for part, ms in parts.items()}
    wall = statistics.median(walls) * 1e3
    parts = {part: share * wall for part, share in shares.items()}
    parts["Python, dispatch and allocation (the rest)"] = max(0.0, wall - sum(parts.values()))
    return {**parts, "wall": wall, "share": sum(shares.values())}


def dispatch_cost(target, repeats: int = 200) -> tuple[float, float]:
    """(ms a layer, ms a forward) of the fast path's Python and dispatch on this machine, run as ``target``'s
    layers run (compiled or eager): one-token forwards of random models with 1 and 16 tiny layers, whose
    kernels cost next to nothing, interleaved; the slope is a layer's cost, the intercept the rest of a
    forward. An upper bound (the tiny kernels are in it), free of the memory traffic of real weights."""
    import os

    from .models import load

    before = os.environ.get("EXPLORER_COMPILE")
    os.environ["EXPLORER_COMPILE"] = "1" if _is_compiled(target) else "0"
    try:
        runners = {}
        for layers in (1, 16):
            tiny = load(f"tiny-random:1:{layers}")
            runners[layers] = CachedForward(full_forward(tiny.model), tiny.device)
    finally:
        if before is None:
            os.environ.pop("EXPLORER_COMPILE", None)
        else:
            os.environ["EXPLORER_COMPILE"] = before
    ids = [i % 30 + 1 for i in range(130)]
    times = {layers: [] for layers in runners}
    with torch.inference_mode():
        for runner in runners.values():
            runner.logits(ids[:128], 1)
        for rep in range(repeats + 10):
            for layers, runner in runners.items():
                runner.truncate(128)
                start = time.perf_counter()
                runner.logits(ids[:129], 1)
                if rep >= 10:
                    times[layers].append(time.perf_counter() - start)
    one, many = (statistics.median(times[n]) * 1e3 for n in (1, 16))
    per_layer = (many - one) / 15
    return per_layer, one - per_layer


def report(target, sizes=(1, 2, 3, 4, 5, 8, 16), context: int = 128, repeats: int = 15,
           draft: str | None = None) -> str:
    """The machine, the kernel choice, the compiled layer's state, T(n) per forward and the split of one
    forward, as markdown; with ``draft``, its step against its bytes and what keeping the text costs it at best."""
    dtype = str(target.dtype).replace("torch.", "")
    fast.fast_view(target.model)  # the kernel choice and the compiled layer, made or loaded before timing
    choice = fast.kernel_choice(target.model)
    lines = [f"Machine: {machine.words(dtype=dtype)}.",
             f"Kernels: {choice.words() if choice else 'the model’s own (no fast path here)'}.",
             "Compiled layer: " + ("; ".join(f"{k}: {v}" for k, v in compiled.status().items()) or
                                   ("off (EXPLORER_COMPILE=0)" if not compiled.enabled() else
                                    "not used: layers this small decode eagerly (EXPLORER_COMPILE=1 compiles them)"
                                    if fast.fast_view(target.model) is not target.model else
                                    "not used (no fast path for this model, device or dtype)")) + ".",
             ""]
    pace: list[float] = []
    costs = verify_costs(target, sizes, context, repeats, pace)
    lines += [f"{target.name} on {target.device} ({dtype}, {torch.get_num_threads()} threads), {context} cached "
              f"tokens, medians of {repeats}:", "", *cost_table(costs, sizes, pace)]
    if target.device.type == "cpu" and fast.fast_view(target.model) is not target.model:
        lines += ["", *split_lines(breakdown(target, 1, context), "compiled" if _is_compiled(target) and
                                   not compiled.paused() else "eager")]
        per_layer, per_forward = dispatch_cost(target)
        layers = len(fast.fast_view(target.model).model.layers)
        alone = per_layer * layers + per_forward
        t1 = costs[next(iter(costs))][sizes[0]] * 1e3 if sizes[0] == 1 else None
        lines += ["", dispatch_words(per_layer, per_forward, layers, t1)]
    if draft:
        step = draft_step(target, draft, context, repeats)
        ceiling = ceiling_words(step, list(costs.values())[-1])  # the last forward is the one decoding uses
        lines += ["", draft_words(draft, step)] + (["", ceiling] if ceiling else [])
    return "\n".join(lines)


def draft_step(target, spec: str, context: int = 128, repeats: int = 15) -> dict[str, float]:
    """One step of the draft ``spec`` against its bytes (#49): the median seconds of a one-row step after ``context``
    cached tokens, the bytes the step reads as its forward declares them (``weight_bytes``: the low-bit copies'
    packed codes, scales and head), and the rate this machine reads as many bytes again and again, measured now
    (``machine.read_bandwidth`` at the step's size: from memory where they outgrow the cache, from the cache where
    they fit, as the steps then read them): a step cannot be faster than bytes / that rate. A draft that declares no
    bytes is refused in one line (counting a model's parameters would be wrong for an early exit, which runs some of
    the target's layers)."""
    from .drafts import make_drafter
    from .methods import discover
    from .models import load

    discover()  # the method packages register their draft kinds
    drafter = make_drafter(spec, target, load)
    forward = getattr(drafter.runner, "forward", None) if drafter.gives_distributions else None  # its own forward
    if not hasattr(forward, "weight_bytes"):
        raise ExplorerError(f"--draft weighs a draft whose step declares the bytes it reads (int4, int8); {spec} "
                            "does not")
    runner = drafter.runner
    ids = _ids(target, context + repeats + 2)
    runner.logits(ids[:context], 1)
    # where a one-token step runs in one call (engine.lowbit_decoder), the layers one by one are timed
    # too, interleaved with it: what the one call saves, measured at the same moments
    ways = {"step_s": contextlib.nullcontext}
    if getattr(forward, "whole_step", lambda: False)():
        ways["layers_s"] = layer_by_layer
    times: dict[str, list[float]] = {way: [] for way in ways}
    for n in range(repeats + 1):
        for way, context_manager in ways.items():
            runner.truncate(context + n)
            with context_manager():
                start = time.perf_counter()
                runner.logits(ids[: context + n + 1], 1)
                if n:  # the first is a warm-up
                    times[way].append(time.perf_counter() - start)
    size = float(forward.weight_bytes())
    return {**{way: statistics.median(t) for way, t in times.items()}, "bytes": size,
            "bandwidth": machine.read_bandwidth(max(1, math.ceil(size / 2**20))), "alpha": drafter.expected_acceptance}


def draft_words(spec: str, step: dict[str, float]) -> str:
    """``draft_step`` in a line: the step, its bytes, the floor they set here and the step against it; a step
    faster than its floor cannot be (the machine's load changed between the two timings), and says so instead."""
    floor = step["bytes"] / step["bandwidth"]
    size = f"{step['bytes'] / 1e6:.1f} MB" if step["bytes"] >= 1e5 else f"{step['bytes'] / 1e3:.1f} kB"
    said = (f"Draft {spec}: one step {step['step_s'] * 1e3:.2f} ms (median); it reads {size}, which this machine, "
            f"reading as many bytes again and again ({step['bandwidth'] / 1e9:.1f} GB/s, now), reads in "
            f"{floor * 1e3:.2f} ms")
    if step["step_s"] < floor:
        return (f"{said}: a step faster than reading its bytes cannot be (the machine's load changed between the two "
                "timings), so no ratio is shown; rerun on a quiet machine.")
    said = f"{said}: the step is {step['step_s'] / floor:.2f}× its bytes"
    if "layers_s" in step:  # the one-call step and the layers one by one, timed at the same moments
        layers = step["layers_s"]
        ratio = f", {layers / floor:.2f}× its bytes" if layers >= floor else ""  # no ratio that cannot be
        said += f" (every layer and the head in one call; the layers one by one: {layers * 1e3:.2f} ms{ratio})"
    return said + "."


def ceiling_words(step: dict, t_of_n: dict[int, float]) -> str | None:
    """What keeping the target's text costs this draft at best (#49): its step against T(n) of the forward decoding
    uses, each measured n ≥ 2 read as a round of γ = n − 1 drafts (``theory.share_of_the_draft_alone``), for a
    draft always right and at the draft's expected agreement. None where it cannot be said: no n ≥ 2 measured, a
    step dearer than a target step (such a draft does not pay), or T(n)/T(1) the bounds refuse."""
    t1 = t_of_n.get(1)
    sizes = [n for n in sorted(t_of_n) if n >= 2 and t1 and not verify_ratio_doubt(t_of_n[n] / t1, n)]
    if not sizes or step["step_s"] >= t1:
        return None
    c = step["step_s"] / t1

    def best(alpha: float) -> tuple[int, float]:
        shares = {n: float(share_of_the_draft_alone(alpha, n - 1, c, t_of_n[n] / t1)) for n in sizes}
        n = max(shares, key=shares.get)
        return n, shares[n]

    n, top = best(1.0)
    said = (f"Kept lossless, this draft keeps at most {top:.0%} of its own speed alone here: even always right, a "
            f"round of {n - 1} drafts ({step['step_s'] * 1e3:.2f} ms each) ends in a target forward of {n} rows "
            f"(T({n}) = {t_of_n[n] * 1e3:.1f} ms), the best of the n measured")
    if len(sizes) >= 2:  # longer rounds tend to a step against each further row's cost, where rows cost alike
        a, b = sizes[-2:]
        row = (t_of_n[b] - t_of_n[a]) / (b - a)
        if row > 0:
            said += (f"; longer rounds tend to {step['step_s'] / (step['step_s'] + row):.0%} (a step against "
                     f"{row * 1e3:.2f} ms a further row, from T({a}) to T({b}))")
    if step.get("alpha"):
        n, share = best(step["alpha"])
        said += f"; at its expected agreement (α = {step['alpha']:.3f}) {share:.0%}, at γ = {n - 1}"
    return said + "."


def dispatch_words(per_layer: float, per_forward: float, layers: int, t1: float | None) -> str:
    """What Python and dispatch alone cost (``dispatch_cost``), in words; a share of T(1) only where it is one, and
    nothing but why where the fit cannot be (a layer or a forward costing less than nothing: the two tiny models
    met different loads)."""
    if per_layer <= 0 or per_forward < 0:
        return ("Python and dispatch alone: not shown — the random models of 1 and 16 tiny layers that measure them "
                f"gave {per_layer * 1e3:.0f} µs a layer and {per_forward:.2f} ms for the rest of a forward, which no "
                "forward can cost (they met different loads); rerun on a quiet machine.")
    alone = per_layer * layers + per_forward
    of_t1 = f" ({alone / t1:.0%} of T(1))" if t1 and alone <= t1 else ""  # more than all of it is not a share
    return (f"Python and dispatch alone, measured on random models of 1 and 16 tiny layers run the same way (their "
            f"kernels cost next to nothing; an upper bound): {per_layer * 1e3:.0f} µs a layer and {per_forward:.2f} ms "
            f"a forward, so {alone:.1f} ms of this model's {layers}-layer forward{of_t1}. The rest of the wall time "
            "beyond the kernels' own is time the kernels' timers do not see: caches and memory refilled after the "
            "weights stream through.")


def cost_table(costs: dict[str, dict[int, float]], sizes, pace=()) -> list[str]:
    """T(n) per forward as markdown lines: the times, then T(n)/T(1) where it can be (``ratios.verify_ratio_doubt``;
    one that cannot is "–" with a note), and a warning when the pace probe moved while they were measured."""
    head = "| forward | " + " | ".join(f"T({n}) ms" for n in sizes) + " | " + \
           " | ".join(f"T({n})/T(1)" for n in sizes[1:]) + " |"
    lines, refused = [head, "|---|" + "---|" * (2 * len(sizes) - 1)], []
    for name, row in costs.items():
        cells = []
        for n in sizes[1:]:
            ratio = row[n] / row[sizes[0]]
            why = verify_ratio_doubt(ratio, n, who="its forwards")
            cells.append("–" if why else f"{ratio:.2f}")
            if why:
                refused.append(f"{name}: T({n})/T(1) {why}")
        lines.append(f"| {name} | " + " | ".join(f"{row[n] * 1e3:.1f}" for n in sizes) + " | " + " | ".join(cells) + " |")
    samples = [s for s in pace if s > 0]
    if samples and max(samples) > PACE_TOLERANCE * min(samples):
        lines += ["", f"Unreliable: the machine's pace moved while these were measured (a fixed test took "
                      f"{min(samples):.1f}–{max(samples):.1f} ms; other work shared the CPU). Rerun on a quiet machine."]
    if refused:
        lines += ["", "Not shown, since no forward can cost that (another process slowed some of the forwards; rerun on "
                      "a quiet machine):", "", *(f"- {line}" for line in refused)]
    return lines


def split_lines(parts: dict[str, float], kind: str) -> list[str]:
    """Where one forward goes (``breakdown``) as markdown lines; the split is not printed when the parts' own shares
    add up to more than the forward (``ratios.shares_doubt``)."""
    parts = dict(parts)
    wall, share = parts.pop("wall"), parts.pop("share")
    title = f"Where one fast-path ({kind}) forward of 1 token goes ({wall:.1f} ms"
    why = shares_doubt(share)
    if why:
        return [f"{title}): not shown — {why}."]
    return [f"{title}; the kernels' shares of the forward timed by torch.profiler, applied to the wall time without "
            "it; the rest is that wall time less theirs):", "", "| part | ms | share |", "|---|---|---|",
            *(f"| {part} | {ms:.1f} | {ms / wall:.0%} |" for part, ms in parts.items())]
