"""Resumable training: one checkpoint format for every trainer (the trained tensors, the optimizer and
schedule states, the losses so far and the seconds spent), written then renamed so that an interrupted
save never leaves half a file behind."""

from __future__ import annotations

from pathlib import Path

import torch


def save(path: Path, tensors: dict[str, object], optimizer, schedule, losses: list[float], seconds: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({**tensors, "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
                "losses": torch.tensor(losses, dtype=torch.float64), "seconds": seconds}, tmp)
    tmp.replace(path)


def resume(path: Path, optimizer, schedule) -> tuple[dict, list[float], float] | None:
    """(the trained tensors, the losses, the seconds spent) of a checkpoint, with the optimizer and the
    schedule restored; None when there is none yet."""
    if not path.is_file():
        return None
    state = torch.load(path, weights_only=True)
    optimizer.load_state_dict(state.pop("optimizer"))
    schedule.load_state_dict(state.pop("schedule"))
    return state, [float(x) for x in state.pop("losses")], float(state.pop("seconds"))
