"""What a target forward costs on this machine: T(n) for the model's own forward against the fast path,
and where one forward's time goes (``python -m explorer profile``).

Leviathan et al.'s Theorem 3.8 prices a verification of γ + 1 tokens like one target step; on a CPU
that holds only as far as T(γ + 1)/T(1) ≈ 1. This measures T(n) the way ``engine.costs`` does (a
``CachedForward`` cut back to a fixed context before each call, the sizes interleaved so a slow spell of
the machine hits them all alike, medians), for both forwards side by side in one process, and splits
one forward of the fast path into matmuls, attention, elementwise work and the rest (``torch.profiler``).
"""

from __future__ import annotations

import statistics
import time

import torch

from .engine.cache import CachedForward
from .engine.forward import full_forward

# torch.profiler op names by part of a decoder forward
PARTS = {
    "linear layers (matmuls)": ("mkldnn::_linear_pointwise", "aten::addmm", "aten::mm", "aten::linear",
                                "aten::matmul", "aten::bmm"),
    "attention (SDPA)": ("aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_attention_math"),
    "norms, rotary, SiLU, residual adds, KV-cache writes": (
        "aten::mul", "aten::add", "aten::pow", "aten::mean", "aten::rsqrt", "aten::silu", "aten::neg", "aten::cat",
        "aten::_to_copy", "aten::copy_", "aten::cos", "aten::sin", "aten::rms_norm", "aten::_fused_rms_norm"),
}


def own_forward(model: torch.nn.Module):
    """The model's own ``forward`` (its modules as loaded: MKL's kernels on the CPU)."""
    def forward(input_ids, cache, n_logits):
        return model(input_ids=input_ids, past_key_values=cache, use_cache=True, logits_to_keep=n_logits).logits[0]
    return forward


def _ids(target, count: int) -> list[int]:
    return [i % max(2, target.vocab_size - 1) + 1 for i in range(count)]


def verify_costs(target, sizes=(1, 2, 3, 4, 5, 8, 16), context: int = 128, repeats: int = 15) -> dict[str, dict[int, float]]:
    """Median seconds of one forward of n new tokens after ``context`` cached ones, per forward kind."""
    ids = _ids(target, context + max(sizes))
    runners = {"model's own forward": CachedForward(own_forward(target.model), target.device),
               "fast path": CachedForward(full_forward(target.model), target.device)}
    sync = torch.cuda.synchronize if target.device.type == "cuda" else (lambda: None)
    times = {(name, n): [] for name in runners for n in sizes}
    for runner in runners.values():
        runner.logits(ids[:context], 1)
    for rep in range(repeats + 1):  # the first pass is a warm-up
        for n in sizes:
            for name, runner in runners.items():
                runner.truncate(context)
                sync()
                start = time.perf_counter()
                runner.logits(ids[: context + n], n)
                sync()
                if rep:
                    times[(name, n)].append(time.perf_counter() - start)
    return {name: {n: statistics.median(times[(name, n)]) for n in sizes} for name in runners}


def breakdown(target, n: int = 1, context: int = 128, repeats: int = 20) -> dict[str, float]:
    """Milliseconds per fast-path forward of ``n`` tokens by part (PARTS), the rest as Python and
    dispatch, and the profiled wall time (the profiler itself adds a little)."""
    from torch.profiler import ProfilerActivity, profile

    ids = _ids(target, context + n)
    runner = CachedForward(full_forward(target.model), target.device)
    runner.logits(ids[:context], 1)
    for _ in range(3):
        runner.truncate(context)
        runner.logits(ids, n)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(repeats):
            runner.truncate(context)
            runner.logits(ids, n)
        wall = (time.perf_counter() - start) / repeats * 1e3
    events = prof.key_averages()
    parts = {part: sum(e.self_cpu_time_total for e in events if e.key in names) / repeats / 1e3
             for part, names in PARTS.items()}
    parts["Python, dispatch and small ops (the rest)"] = max(0.0, wall - sum(parts.values()))
    return {**parts, "wall": wall}


def report(target, sizes=(1, 2, 3, 4, 5, 8, 16), context: int = 128, repeats: int = 15) -> str:
    """Both measurements as markdown tables."""
    costs = verify_costs(target, sizes, context, repeats)
    head = "| forward | " + " | ".join(f"T({n}) ms" for n in sizes) + " | " + \
           " | ".join(f"T({n})/T(1)" for n in sizes[1:]) + " |"
    lines = [f"{target.name} on {target.device} ({str(target.dtype).replace('torch.', '')}, "
             f"{torch.get_num_threads()} threads), {context} cached tokens, medians of {repeats}:", "",
             head, "|---|" + "---|" * (2 * len(sizes) - 1)]
    for name, row in costs.items():
        lines.append(f"| {name} | " + " | ".join(f"{row[n] * 1e3:.1f}" for n in sizes) + " | "
                     + " | ".join(f"{row[n] / row[sizes[0]]:.2f}" for n in sizes[1:]) + " |")
    parts = breakdown(target, 1, context)
    wall = parts.pop("wall")
    lines += ["", f"Where one fast-path forward of 1 token goes ({wall:.1f} ms under the profiler):", "",
              "| part | ms | share |", "|---|---|---|"]
    lines += [f"| {part} | {ms:.1f} | {ms / wall:.0%} |" for part, ms in parts.items()]
    return "\n".join(lines)
