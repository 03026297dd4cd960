"""The soak's served app and what it measures of it: the app served in this process on a loopback port as
``python app.py`` serves it (``served``), the environment that keeps it offline, and a sampler of the process's
resident memory and of the decodes the app's job gate holds (``Sampler``). Shared by ``soak`` and
``soak_adversarial``."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time

SAMPLE_EVERY_S = 0.2  # running decodes; the RSS every 5th sample (every second)


def set_offline_env() -> None:
    # Before gradio / huggingface_hub load: no analytics, no Hub (as app.py and the tests set them).
    for name, value in (("GRADIO_ANALYTICS_ENABLED", "False"), ("HF_HUB_DISABLE_TELEMETRY", "1")):
        os.environ.setdefault(name, value)
    if "SPACE_ID" not in os.environ:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")


def rss_mb() -> float | None:
    """This process's resident set size in MB (psutil if installed, else /proc/self/status)."""
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except ImportError:
        pass
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with contextlib.closing(socket.socket(family)) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served(host: str):
    """Serve ``ui.serving_demo()`` (what ``python app.py`` serves) in this process; yield (demo, URL)."""
    from ..ui import launch_options, serving_demo

    demo = serving_demo()
    port = _free_port(host)
    demo.launch(server_name=host, server_port=port, prevent_thread_lock=True, quiet=True, **launch_options())
    try:
        shown = f"[{host}]" if ":" in host else host
        yield demo, f"http://{shown}:{port}/"
    finally:
        with contextlib.redirect_stdout(sys.stderr):  # Gradio prints "Closing server running on port: …"
            demo.close()


class Sampler:
    """Samples, in a thread, the process's RSS (every second) and the decodes running in the server (the app's
    job counters, ``ui.jobs.WORK``: the soak runs no other job)."""

    def __init__(self):
        from ..ui.layout import DECODE_CONCURRENCY

        self.t0 = time.perf_counter()
        self.series: list[dict] = []  # every second: {t, rss_mb, running}
        self.max_running = 0
        self.max_under_way = 0
        self.over_limit_samples = 0
        self.limit = DECODE_CONCURRENCY
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-sampler", daemon=True)

    @staticmethod
    def running_decodes() -> int:
        """Decodes computing a round now (whether or not Gradio still counts them): the slots of ``WORK`` held.
        The API's decode is a generator that Gradio resumes once per round and that holds a slot only while it
        computes, so one that waits between rounds, or that a cancel ended, is not counted."""
        from ..ui.jobs import WORK

        return WORK.busy

    @staticmethod
    def under_way() -> int:
        """Decodes started and not ended (``WORK.running``): computing, between two rounds or waiting for a slot."""
        from ..ui.jobs import WORK

        return WORK.running

    def _loop(self):
        tick = 0
        while not self._stop.is_set():
            running = self.running_decodes()
            self.max_running = max(self.max_running, running)
            self.over_limit_samples += running > self.limit
            self.max_under_way = max(self.max_under_way, self.under_way())
            if tick % round(1 / SAMPLE_EVERY_S) == 0:
                self.series.append({"t": round(time.perf_counter() - self.t0, 1), "rss_mb": rounded(rss_mb()),
                                    "running": running})
            tick += 1
            self._stop.wait(SAMPLE_EVERY_S)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.series.append({"t": round(time.perf_counter() - self.t0, 1), "rss_mb": rounded(rss_mb()),
                            "running": self.running_decodes()})


def rounded(x, digits=1):
    return None if x is None else round(x, digits)
