"""Every figure reads on a phone and on a desktop (#29 item 1): after a run of each registered method,
no two text boxes of a figure overlap and none is clipped — titles, subplot titles and other
annotations, axis titles, the legend, the mode bar, and tick labels against those — in every tab, at
390 px (a phone held upright) and at 1400 px. The page lays figures out in the browser
(``explorer/ui/fit_figures.js``); the boxes are measured there (``tests/figure_text.js``)."""

from __future__ import annotations

import pytest
from conftest_ui import DECODE_TIMEOUT_MS, figure_text_problems, open_tab, set_number, wait_status

from explorer import methods

TABS = ("watch", "understand", "compare", "audit", "traces")


@pytest.mark.parametrize("width,height", [(390, 844), (1400, 1000)])
def test_no_figure_text_overlaps_or_is_clipped_for_any_method_in_any_tab(browser, url, width, height):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#run")
    set_number(page, "max-new-tokens", 12)
    found = {}
    for method in methods.discover():
        page.locator("#method input").click()
        page.get_by_role("option", name=method, exact=True).click()
        page.click("#run")
        wait_status(page, "tokens/s")
        # the run is over when nothing is pending (plain decoding may be measured right after it)
        page.wait_for_function("() => !document.querySelector('#status').innerText.includes('◷')",
                               timeout=DECODE_TIMEOUT_MS)
        for tab in TABS:
            open_tab(page, tab)
            if problems := figure_text_problems(page):
                found[f"{method}, {tab}"] = problems
        open_tab(page, "watch")
    if width <= 480:  # a phone's figures: one column, and no mode bar over their text
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width + 1
    context.close()
    assert not found, found
