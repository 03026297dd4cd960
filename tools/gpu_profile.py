"""Where a graphed forward's time goes on a GPU (issue 52): the random model of the default's shape, one
forward of T new rows after 128 cached positions, timed and then profiled (CPU and CUDA), graphs on.

    python tools/gpu_profile.py [--rows 1,8] [--repeats 20] [--splits 16]

Prints, per T: the median wall time of a forward, the CUDA time its kernels took, and the top operators by
self CPU time and by self CUDA time: whether the forward is bound by the host (Python, launches, syncs) or
by the card."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_check import random_default_shape  # noqa: E402

from explorer.engine import cuda_graphs, static_stack  # noqa: E402
from explorer.engine.cache import CachedForward  # noqa: E402
from explorer.engine.forward import full_forward  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1,8")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--splits", type=int, default=static_stack.SPLITS,
                        help="static_stack.SPLITS for this process (1: the unsplit weighted sum); to compare values, run "
                             "once per value: a graph's memory pool cannot be dropped and recaptured in one process")
    args = parser.parse_args()
    target = random_default_shape("cuda", None, 30)
    runner = CachedForward(full_forward(target.model), target.device)
    ids = [i % 1000 + 1 for i in range(256)]
    runner.logits(ids[:128], 1)
    static_stack.SPLITS = splits = args.splits
    for t in (int(x) for x in args.rows.split(",")):
        for _ in range(3):  # captures
            runner.truncate(128)
            runner.logits(ids[:128 + t], t)
        times = []
        for _ in range(args.repeats):
            runner.truncate(128)
            torch.cuda.synchronize()
            start = time.perf_counter()
            runner.logits(ids[:128 + t], t)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(10):
                runner.truncate(128)
                runner.logits(ids[:128 + t], t)
            torch.cuda.synchronize()
        events = prof.key_averages()
        cuda_us = sum(e.self_device_time_total for e in events) / 10
        print(f"\n== T = {t}, SPLITS = {splits}: wall {statistics.median(times) * 1e3:.3f} ms (median of {args.repeats}); "
              f"kernels {cuda_us / 1e3:.3f} ms a forward; graphs: {cuda_graphs.status()}")
        print(events.table(sort_by="self_cpu_time_total", row_limit=18, max_name_column_width=60))
        print(events.table(sort_by="self_device_time_total", row_limit=12, max_name_column_width=60))


if __name__ == "__main__":
    main()
