"""Resumable training: one checkpoint format for every trainer (the trained tensors, the optimizer and
schedule states, the losses so far and the seconds spent), written then renamed so that an interrupted
save never leaves half a file behind; where a run's checkpoint lives; and a trainer config's checks."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import torch

from ..artifacts import fingerprint
from ..errors import ExplorerError
from ..machine import cache_root


def check_config(checks: list[tuple[bool, str]]) -> None:
    """A trainer config's checks, each (holds, what to say): the first that fails as one ``ExplorerError``."""
    for ok, message in checks:
        if not ok:
            raise ExplorerError(message)


def run_path(folder: str, model, config, tag: str = "", **trained_on) -> Path:
    """Where a run's checkpoint lives: ``cache_root()/folder/<the target's fingerprint><tag>-<digest>.pt``, the
    digest of the run's config (a dataclass) and of what it trains on (JSON values), so that a run resumes only
    its own checkpoint."""
    key = json.dumps({"config": asdict(config), **trained_on}, sort_keys=True)
    return cache_root() / folder / f"{fingerprint(model)}{tag}-{hashlib.sha1(key.encode()).hexdigest()[:16]}.pt"


def save(path: Path, tensors: dict[str, object], optimizer, schedule, losses: list[float], seconds: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # one per process: two may train the same
    torch.save({**tensors, "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
                "losses": torch.tensor(losses, dtype=torch.float64), "seconds": seconds}, tmp)
    tmp.replace(path)


def resume(path: Path, optimizer, schedule, restore: Callable[[dict], None]) -> tuple[list[float], float]:
    """(the losses, the seconds spent) of a checkpoint, its trained tensors handed to ``restore`` and the
    optimizer and the schedule restored; ([], 0.0) when there is none yet."""
    if not path.is_file():
        return [], 0.0
    state = torch.load(path, weights_only=True)
    optimizer.load_state_dict(state.pop("optimizer"))
    schedule.load_state_dict(state.pop("schedule"))
    losses, seconds = [float(x) for x in state.pop("losses")], float(state.pop("seconds"))
    restore(state)
    return losses, seconds
