"""Helpers for the app tests: serve ``app.demo`` in this process on a free port."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


# Debian's Chromium (never a downloaded browser), headless, with nothing reaching out of the machine
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]


def busy_seconds(window: float = 1.0) -> float:
    """CPU seconds this process (the served app runs in it) spends over ``window`` wall seconds."""
    start = time.process_time()
    time.sleep(window)
    return time.process_time() - start


def free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served_app():
    """Launch the app as ``python app.py`` would (same theme and styles); yield (demo, base URL)."""
    import app
    from explorer.ui import launch_options

    port = free_port()
    app.demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                    **launch_options())
    try:
        yield app.demo, f"http://127.0.0.1:{port}/"
    finally:
        app.demo.close()
