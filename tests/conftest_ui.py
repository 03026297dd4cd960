"""Helpers for the app tests: serve ``app.demo`` in this process on a free port; drive the page in Chromium
(the ``browser``, ``page`` and ``url`` fixtures built on these are in conftest.py).

Playwright is imported inside the page helpers, so that the tests without a browser need none."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

# Debian's Chromium with the switches the tests drive it with, the Traces tab's upload input, a free local port and the
# page served on it: shared with the measurement of a round step's cost (``python -m explorer.tools.step_cost``)
from explorer.tools.step_cost import (CHROMIUM, CHROMIUM_ARGS, SETTLED, UPLOAD_INPUT, free_port,  # noqa: E402, F401
                                      served_page)

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"  # screenshots, timings (git-ignored)
DECODE_TIMEOUT_MS = 240_000  # the default model on a busy 2-core CPU


def busy_seconds(window: float = 1.0) -> float:
    """CPU seconds this process (the served app runs in it) spends over ``window`` wall seconds."""
    start = time.process_time()
    time.sleep(window)
    return time.process_time() - start


@contextlib.contextmanager
def served_app():
    """Launch the app as ``python app.py`` would (same theme and styles); yield (demo, base URL)."""
    import app

    with served_page(app.demo) as url:
        yield app.demo, url


# -- the page --------------------------------------------------------------------------------------------

DESKTOP = {"width": 1500, "height": 1000}


def open_app(tab, url: str, viewport: dict | None = None):
    """The app opened afresh in ``tab`` (a new Gradio session) at ``viewport`` (``DESKTOP`` by default), ready."""
    tab.set_viewport_size(viewport or DESKTOP)
    tab.goto(url)
    tab.wait_for_selector("#run")
    return tab



def set_number(page, elem_id: str, value) -> None:
    """Type into a slider's number box and press Enter (what fires its input event)."""
    from playwright.sync_api import expect

    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    expect(box).to_have_value(str(value))  # a playing timer's tick can land between clear and type
    box.press("Enter")


# A run whose test is not about the page's headline. The page opens on ``quantized``, and after a quantized run it
# races three lanes (plain decoding, the 4-bit copy drafting, the copy alone: "What keeping the text costs",
# ``explorer/ui/comparing.py``) where any other run is weighed against plain decoding alone; a test that reads the
# rounds, the views, the audit or the comparison in general proves the same with a draft of the target's own first
# layers (distributions, so rejected rounds carry q), and leaves the headline to the tests of it
# (test_story_browser.py, test_browser.py's every-tab screenshots).
PLAIN_RUN = ("speculative", "early-exit:4")


def choose(page, method: str, draft: str | None = None) -> None:
    """Choose the method from its list (typing its name and pressing Enter could leave the old value while the list's
    filter caught up: 'eagle-tree' typed over 'beam' ran beam), then type the drafter; each is checked to have taken."""
    from playwright.sync_api import expect

    page.locator("#method input").click()
    page.get_by_role("option", name=method, exact=True).click()
    expect(page.locator("#method input")).to_have_value(method)
    if draft is not None:
        choose_draft(page, draft)


def choose_draft(page, draft: str) -> None:
    """Type the drafter as a user may type any spec, and check it took."""
    from playwright.sync_api import expect

    page.locator("#draft input").fill(draft)
    page.locator("#draft input").press("Enter")
    expect(page.locator("#draft input")).to_have_value(draft)


def choose_plain_run(page) -> None:
    """``PLAIN_RUN`` on the page: a run weighed against plain decoding alone, without the headline's race."""
    choose(page, *PLAIN_RUN)


def wait_status(page, text: str, timeout: int = DECODE_TIMEOUT_MS) -> None:
    page.wait_for_function("t => document.querySelector('#status').innerText.includes(t)", arg=text, timeout=timeout)


def wait_compared(page, timeout: int = DECODE_TIMEOUT_MS) -> bool:
    """Wait until the run is weighed against plain decoding: True with a measured ratio, False where the page says
    the ratio is unreliable because the machine's pace changed between the run and plain decoding (#42: on a busy
    machine that is the honest answer, not a failure)."""
    page.wait_for_function("() => { const t = document.querySelector('#status').innerText; "
                           "return t.includes('measured ×') || t.includes('unreliable'); }", timeout=timeout)
    return "measured ×" in page.inner_text("#status")


def open_tab(page, name: str) -> None:
    """Show one of the page's tabs: watch, understand, compare, audit, traces."""
    from playwright.sync_api import expect

    page.click(f"#tab-{name}-button")
    expect(page.locator(f"#tab-{name}")).to_be_visible()


def downloaded_text(page, selector: str) -> str:
    """What clicking the download button ``selector`` offers: the click must start a download, and its link
    must serve the file, which is read over HTTP. Not through Chromium's copy on disk: in one CI run every
    download of a module's browser ended "canceled" (the DevTools protocol reports any interrupted download
    so: a failure of the test browser's temporary folder) while the links answered, and the page's part is
    the link."""
    import urllib.request
    import warnings

    with page.expect_download() as info:
        page.click(selector)
    with urllib.request.urlopen(info.value.url, timeout=30) as answer:
        text = answer.read().decode("utf-8")
    failure = info.value.failure()  # kept in the log, to learn what ends Chromium's copy where it fails
    if failure:
        warnings.warn(f"Chromium's own copy of {selector}'s download ended: {failure}", stacklevel=2)
    return text


def upload_trace(page, path) -> None:
    """Replay a trace file through the Traces tab's upload button (the page returns to Watch)."""
    open_tab(page, "traces")
    page.set_input_files(UPLOAD_INPUT, str(path))
    open_tab(page, "watch")


FIGURE_TEXT_JS = (Path(__file__).parent / "figure_text.js").read_text(encoding="utf-8")


def wait_figures_settled(page, timeout: int = 30_000) -> None:
    """Wait until the page's layout pass (``explorer/ui/fit_figures.js``) has no scan pending and no Plotly
    relayout under way: its own signal, ``window.__figuresSettled()``, rather than a guessed delay."""
    page.wait_for_function(SETTLED, timeout=timeout)


def figure_text_problems(page, settle_ms: int = 3000) -> list[str]:
    """Every visible figure's overlapping or clipped text (``figure_text.js``), once the page's own
    layout pass (``explorer/ui/fit_figures.js``, which runs after each drawing) has settled; text still
    colliding is measured again for up to ``settle_ms`` (a figure Gradio draws late starts a new pass)."""
    wait_figures_settled(page)
    problems = page.evaluate(FIGURE_TEXT_JS)
    for _ in range(settle_ms // 500):
        if not problems:
            break
        page.wait_for_timeout(500)
        wait_figures_settled(page)
        problems = page.evaluate(FIGURE_TEXT_JS)
    return problems
