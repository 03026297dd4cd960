"""A switch one thread turns on for a block: ``with SWITCH.block(): …`` and ``SWITCH.on()``. The engine's ways of
running the same forward another way for a comparison or a test (``compiled.eager``, ``cuda_graphs.static_on_cpu``,
``lowbit_decoder.layer_by_layer``) are each one; per thread, so a comparison never changes another visitor's decode.

A leaf: imports nothing of the explorer."""

from __future__ import annotations

import contextlib
import threading


class ThreadSwitch:
    """Off until a block on this thread turns it on; blocks nest (the outer state comes back)."""

    def __init__(self):
        self._local = threading.local()

    def on(self) -> bool:
        return getattr(self._local, "on", False)

    @contextlib.contextmanager
    def block(self):
        before = self.on()
        self._local.on = True
        try:
            yield
        finally:
            self._local.on = before
