"""Every figure reads on a phone and on a desktop (#29 item 1): after a run of each registered method,
no two text boxes of a figure overlap and none is clipped — titles, subplot titles and other
annotations, axis titles, the legend, the mode bar, and tick labels against those — in every tab, at
390 px (a phone held upright) and at 1400 px. The page lays figures out in the browser
(``explorer/ui/fit_figures.js``); the boxes are measured there (``tests/figure_text.js``).

Each method runs once, one test each on one page: its figures are read at the width they were drawn at, then the
window crosses to the other width (a phone turned sideways, a desktop window narrowed), where the page lays every
figure out again from the figure as drawn, and they are read again. The next method is drawn at that width, so
every method is read at both widths, and each width is the one drawn at for every other method. One test per
method rather than one for all: a failure names its method, and the file's share of the suite is handed to a
worker with the others (pytest-xdist hands out one-test files last, where this one's ≈ 100 s ran alone)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from playwright.sync_api import TimeoutError as PageTimeout

from conftest_ui import DECODE_TIMEOUT_MS, figure_text_problems, open_tab, set_number

from explorer import methods

TABS = ("watch", "understand", "compare", "audit", "traces")
# the tabs whose figures a run redraws for its method (Compare, Audit and Traces draw theirs from a report, a
# race or an audit, which test_browser.py's every-tab test runs at both widths): read after every method's run,
# the other tabs once, after the last
RUN_TABS = ("watch", "understand")
SIZES = ({"width": 390, "height": 844}, {"width": 1400, "height": 1000})
EVERY = list(methods.discover())


@pytest.fixture(scope="module")
def window(browser, url):
    """The one page every method runs on, and the size its next run is drawn at (the last run's other size)."""
    context = browser.new_context(viewport=SIZES[0])
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#run")
    set_number(page, "max-new-tokens", 12)
    yield SimpleNamespace(page=page, size=0)
    context.close()


@pytest.mark.parametrize("method", EVERY)
def test_no_figure_text_overlaps_or_is_clipped_after_a_run_of(window, method):
    page = window.page
    page.locator("#method input").click()
    page.get_by_role("option", name=method, exact=True).click()
    page.click("#run")
    # this method's run is over when the status names it with its speed and nothing is pending (plain decoding
    # may be measured right after it); the previous run's status also said "tokens/s". A warning ends the wait too.
    try:
        page.wait_for_function("m => { const t = document.querySelector('#status').innerText.trim(); "
                               "return t.startsWith('⚠️') || (t.startsWith(m + ' ') && t.includes('tokens/s') "
                               "&& !t.includes('◷')); }", arg=method, timeout=DECODE_TIMEOUT_MS)
    except PageTimeout:  # say what the page said instead
        raise AssertionError(f"{method}'s run never ended; the status: {page.inner_text('#status')[:500]!r}") from None
    status = page.inner_text("#status").strip()
    assert not status.startswith("⚠️"), f"{method}'s run was refused: {status[:500]!r}"
    found, read = {}, set()
    for how in ("drawn at", "laid out again at"):
        width = SIZES[window.size]["width"]
        for tab in TABS if method == EVERY[-1] else RUN_TABS:
            open_tab(page, tab)
            if problems := figure_text_problems(page):
                found[f"{how} {width} px, {tab}"] = problems
        if width <= 480:  # a phone's figures: one column, and no mode bar over their text
            assert page.evaluate("() => document.documentElement.scrollWidth") <= width + 1
        read.add(width)
        open_tab(page, "watch")
        if how == "drawn at":
            window.size = 1 - window.size
            page.set_viewport_size(SIZES[window.size])
    assert not found, found
    assert read == {s["width"] for s in SIZES}
