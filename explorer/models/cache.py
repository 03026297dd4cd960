"""Where the models' on-disk copies live: ``cache_root()`` (the converted default, its fetched GGUF and wheel,
and the trainers' cached data all go under it). Not the KV cache, which is ``engine/cache.py``."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Where converted models are kept: ``$EXPLORER_CACHE`` or ``~/.cache/spec-explorer``."""
    return Path(os.environ.get("EXPLORER_CACHE") or Path.home() / ".cache" / "spec-explorer")
