"""The training loop every trainer of a draft runs once its loss is written: AdamW with ``lr_factor``'s schedule,
gradients clipped at norm 1, resumed from the run's checkpoint and saved every ``checkpoint_every`` steps
(``checkpoint``), its pace, recent loss and time left said every ``report_every`` steps and after its first.

A trainer gives what is its own — the parameters, the loss of one step (a function of the step, so a resumed
run reads the same windows: ``distill.step_windows``), the tensors its checkpoint keeps and how to restore them —
and gets back the per-step losses and the seconds spent over every session of the run. A step's loss may come in
pieces (an iterable of tensors, each back-propagated as it comes and its gradients summed), so that a step holds
one piece's graph at a time: BiTA's samples each run through the whole frozen target (EAGLE's and EESD's heads
give one tensor)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterable

import torch

from . import checkpoint
from .distill import lr_factor
from ..progress import left_after

CHECKPOINT_EVERY = 50  # steps between checkpoints: an interrupted run loses at most this many


def fit(params: list[torch.nn.Parameter], loss_at: Callable[[int], torch.Tensor | Iterable[torch.Tensor]], *,
        steps: int, lr: float, warmup: float, checkpoint_file: Path, tensors: Callable[[], dict],
        restore: Callable[[dict], None], progress: Callable[[int, int, str], None], label: str,
        lr_floor: float = 0.1, checkpoint_every: int = CHECKPOINT_EVERY,
        report_every: int = 10) -> tuple[list[float], float]:
    """Train ``params`` on ``loss_at(step)`` for the steps the checkpoint has not done yet; (every step's loss,
    the seconds spent training in all sessions). ``tensors()`` is what a checkpoint keeps of the trained parts,
    ``restore`` loads it back; ``label`` names the run in its progress lines ("[label] step 10/300 · …");
    ``lr_floor`` is where the cosine ends (a fraction of ``lr``)."""
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, steps, warmup, lr_floor))
    losses, spent = checkpoint.resume(checkpoint_file, optimizer, schedule, restore)
    first = len(losses)
    if first:
        progress(first, steps, f"[{label}] resumed from {checkpoint_file.name} at step {first}")
    start = time.perf_counter()
    for step in range(first, steps):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_at(step)
        total = 0.0
        for piece in [loss] if isinstance(loss, torch.Tensor) else loss:
            piece.backward()
            total += float(piece.detach())
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        losses.append(total)
        done = step + 1
        elapsed = time.perf_counter() - start
        if done % checkpoint_every == 0 or done == steps:
            checkpoint.save(checkpoint_file, tensors(), optimizer, schedule, losses, spent + elapsed)
        if done % report_every == 0 or done == steps or done == first + 1:
            recent = losses[-10:]
            progress(done, steps, f"[{label}] step {done}/{steps} · {(done - first) / elapsed:.2f} steps/s · "
                                  f"loss {sum(recent) / len(recent):.4f}{left_after(start, done - first, steps - first)}")
    return losses, spent + time.perf_counter() - start
