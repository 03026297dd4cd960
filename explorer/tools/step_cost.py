"""What a round step on the page costs on this machine: the page served in this process, a trace uploaded in
Debian's Chromium (headless), then Next pressed again and again (Prev at the last round). Per step: the wall time from
the click until the slider moved and the page's figures settled (``ui/fit_figures.js``), Chromium's CPU time (all its
processes, from /proc) and this process's (the server's, and Playwright's client). Medians over the steps.

    python -m explorer.tools.step_cost tests/data/trace_bild.json --steps 20

Needs Playwright and ``/usr/bin/chromium`` (``requirements-test.txt``; ``apt-get install chromium``). Chromium's CPU
is every Chromium process's on the machine: measure with no other browser (or test run) going. The browser tests
serve the page and drive Chromium through this module (``tests/conftest_ui.py``), and the draw-once test uploads and
steps through ``replay`` and ``step``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import sys
import time
from pathlib import Path

# Debian's Chromium (never a downloaded browser), headless, with nothing reaching out of the machine
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]
UPLOAD_INPUT = "xpath=//button[@id='trace-upload']/preceding-sibling::input[@type='file'][1]"
SLIDER = "#round-slider input[type=number]"
SETTLED = "() => window.__figuresSettled && window.__figuresSettled()"
MAX_STEPS = 500


def free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served_page(demo=None):
    """``demo`` (by default the page as ``python app.py`` builds it) served as ``app.py`` serves it, on a free local
    port, until the block ends: yields its address."""
    from explorer.ui import launch_options, serving_demo

    demo = demo if demo is not None else serving_demo()
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **launch_options())
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


def replay(page, path, timeout_ms: int = 120_000) -> None:
    """Upload the trace at ``path`` on the Traces tab and wait on Watch until it is shown and its figures settled."""
    page.click("#tab-traces-button")
    page.set_input_files(UPLOAD_INPUT, str(path))
    page.click("#tab-watch-button")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('Replaying an uploaded trace')",
                           timeout=timeout_ms)
    page.wait_for_function(SETTLED, timeout=timeout_ms)


def step(page, timeout_ms: int = 120_000) -> None:
    """Next (Prev at the last round), then wait until the slider moved and the page's figures settled."""
    shown = page.input_value(SLIDER)
    last = page.get_attribute(SLIDER, "max")
    page.click("#prev-round" if shown == last else "#next-round")
    page.wait_for_function("([sel, v]) => document.querySelector(sel).value !== v", arg=[SLIDER, shown],
                           timeout=timeout_ms)
    page.wait_for_function(SETTLED, timeout=timeout_ms)


def chromium_cpu_s() -> float:
    """CPU seconds (user + system) of every running Chromium process, from /proc."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"chromium" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended while we looked
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def measure(path: Path, steps: int, width: int = 1500) -> dict[str, float]:
    """Median seconds a step: {"wall", "chromium_cpu", "server_cpu"} over ``steps`` steps of the trace at ``path``."""
    from playwright.sync_api import sync_playwright

    walls, chromium, server = [], [], []
    with served_page() as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": width, "height": 1000}).new_page()
        page.goto(url)
        page.wait_for_selector("#run")
        replay(page, path)
        for _ in range(steps):
            c, s, w = chromium_cpu_s(), time.process_time(), time.perf_counter()
            step(page)
            walls.append(time.perf_counter() - w)
            server.append(time.process_time() - s)
            chromium.append(chromium_cpu_s() - c)
        browser.close()
    return {"wall": statistics.median(walls), "chromium_cpu": statistics.median(chromium),
            "server_cpu": statistics.median(server)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer.tools.step_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path, help="a trace file (.json), as the page's Traces tab takes it")
    parser.add_argument("--steps", type=int, default=20, help=f"round steps to time (1 to {MAX_STEPS}; default 20)")
    parser.add_argument("--width", type=int, default=1500, help="the window's width in px (default 1500)")
    args = parser.parse_args(argv)
    if not 1 <= args.steps <= MAX_STEPS:
        parser.error(f"--steps must be a whole number from 1 to {MAX_STEPS}")
    if not 320 <= args.width <= 4000:
        parser.error("--width must be from 320 to 4000 px")
    if not args.trace.is_file():
        parser.error(f"no trace file at {args.trace}")
    import explorer

    try:
        rounds = len(explorer.load_trace(args.trace.read_bytes()).rounds)
    except explorer.ExplorerError as err:
        parser.error(f"{args.trace} cannot be read: {err}")
    if rounds < 2:
        parser.error(f"{args.trace} has {rounds} round(s): stepping needs two or more")
    if not CHROMIUM.exists():
        parser.error(f"{CHROMIUM} is missing (apt-get install chromium)")
    from explorer import machine

    cost = measure(args.trace, args.steps, args.width)
    print(f"Machine: {machine.words()}.")
    print(f"A round step of {args.trace.name} at {args.width} px, median of {args.steps}: {cost['wall']:.2f} s wall, "
          f"{cost['chromium_cpu']:.2f} s of Chromium's CPU, {cost['server_cpu']:.2f} s of this process's "
          "(the server and Playwright's client).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
