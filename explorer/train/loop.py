"""The training loop every distillation trainer runs once its loss is written: AdamW with ``lr_factor``'s
schedule, gradients clipped at norm 1, resumed from the run's checkpoint and saved every ``CHECKPOINT_EVERY``
steps (``checkpoint``), its pace and recent loss said every 10 steps.

A trainer gives what is its own — the parameters, the loss of one step (a function of the step, so a resumed
run reads the same windows: ``distill.step_windows``), the tensors its checkpoint keeps and how to restore them —
and gets back the per-step losses and the seconds spent over every session of the run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import torch

from . import checkpoint
from .distill import lr_factor

CHECKPOINT_EVERY = 50  # steps between checkpoints: an interrupted run loses at most this many


def fit(params: list[torch.nn.Parameter], loss_at: Callable[[int], torch.Tensor], *, steps: int, lr: float,
        warmup: float, checkpoint_file: Path, tensors: Callable[[], dict], restore: Callable[[dict], None],
        progress: Callable[[int, int, str], None], label: str) -> tuple[list[float], float]:
    """Train ``params`` on ``loss_at(step)`` for the steps the checkpoint has not done yet; (every step's loss,
    the seconds spent training in all sessions). ``tensors()`` is what a checkpoint keeps of the trained parts,
    ``restore`` loads it back; ``label`` names the run in its progress lines ("[label] step 10/300 · …")."""
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, steps, warmup))
    losses, spent = checkpoint.resume(checkpoint_file, optimizer, schedule, restore)
    first = len(losses)
    start = time.perf_counter()
    for step in range(first, steps):
        loss = loss_at(step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        losses.append(float(loss.detach()))
        done = step + 1
        elapsed = time.perf_counter() - start
        if done % CHECKPOINT_EVERY == 0 or done == steps:
            checkpoint.save(checkpoint_file, tensors(), optimizer, schedule, losses, spent + elapsed)
        if done % 10 == 0 or done == steps:
            recent = losses[-10:]
            progress(done, steps, f"[{label}] step {done}/{steps} · {(done - first) / elapsed:.2f} steps/s · "
                                  f"loss {sum(recent) / len(recent):.4f}")
    return losses, spent + time.perf_counter() - start
