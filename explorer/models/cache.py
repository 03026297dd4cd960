"""Where the models' on-disk copies live: ``cache_root()`` (the converted default, its fetched GGUF and wheel,
and the trainers' cached data all go under it; defined with the machine's other facts in ``explorer.machine``).
Not the KV cache, which is ``engine/cache.py``."""

from __future__ import annotations

from ..machine import cache_root

__all__ = ["cache_root"]
