"""The worst legal traces in Chromium (issue 28, item 5): a 4 096-round Thompson-sampling trace with 65 θ a
round (was 45 s per Next, 320 k SVG points) and a BiTA round with a 1 000-input tree (was 17.6 s a step, a
1.3 M-cell mask). Each is uploaded and stepped; the seconds go to test-artifacts/worst-traces.json."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest_ui import CHROMIUM, UPLOAD_INPUT

from explorer.tools.forged_traces import worst_trace_texts
from explorer.tools.step_cost import SETTLED, replay, step

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
STEP_BOUND_S = 8.0  # on a busy 2-core machine; a few tenths of a second here when quiet

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)

from playwright.sync_api import expect  # noqa: E402


def test_the_worst_legal_traces_upload_and_step_quickly(browser, url, tmp_path):
    timings = []
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#run")
    for n, (name, text) in enumerate(worst_trace_texts()):
        path = tmp_path / f"worst-{n}.json"
        path.write_text(text)
        page.click("#tab-traces-button")
        started = time.perf_counter()
        page.set_input_files(UPLOAD_INPUT, str(path))
        page.click("#tab-watch-button")
        expect(page.locator("#status")).to_contain_text("Replaying an uploaded trace", timeout=120_000)
        shown = time.perf_counter() - started
        box = page.locator("#round-slider input[type=number]")
        before = box.input_value()
        started = time.perf_counter()
        page.click("#next-round")
        page.wait_for_function("([sel, v]) => document.querySelector(sel).value !== v",
                               arg=["#round-slider input[type=number]", before], timeout=120_000)
        # the views arrive with the slider in one update; two frames later they are drawn
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        step = time.perf_counter() - started
        heap = page.evaluate("() => performance.memory ? performance.memory.usedJSHeapSize : null")
        timings.append({"trace": name, "mb": round(len(text) / 2**20, 1), "upload_to_shown_s": round(shown, 2),
                        "step_s": round(step, 2), "js_heap_mb": heap and round(heap / 2**20)})
        assert step < STEP_BOUND_S, timings[-1]
    context.close()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "worst-traces.json").write_text(json.dumps(timings, indent=1))


# Gradio's Plotly as it loads (``window.Plotly = …``), its draws counted by figure before the page wraps them
COUNT_DRAWS_JS = """
Object.defineProperty(window, 'Plotly', {configurable: true, get: () => undefined, set(plotly) {
  const react = plotly.react;
  window.__draws = [];
  plotly.react = function (gd, ...figure) {
    window.__draws.push(gd.closest('[id]') ? gd.closest('[id]').id : '?');
    return react.call(this, gd, ...figure);
  };
  Object.defineProperty(window, 'Plotly', {value: plotly, writable: true, configurable: true});
}});
"""


def test_a_round_step_draws_each_new_figure_once(browser, url):
    """Gradio mounts a new element for each new figure and drew it first in the element it replaces (#50: each
    figure of a round step drawn twice, half the browser's work of a step): the page draws it once."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.add_init_script(COUNT_DRAWS_JS)
    page.goto(url)
    page.wait_for_selector("#run")
    replay(page, Path(__file__).parent / "data" / "trace_bild.json")  # as ``python -m explorer.tools.step_cost`` does
    for _ in range(2):
        expect(page.locator("#view-bild-events .js-plotly-plot")).to_have_count(1)
        drawn = page.evaluate("() => window.__draws.length")
        step(page)
        # the round's figures (its detail, BiLD's events, and acceptance with the round marked) each change
        page.wait_for_function("n => ['round-detail', 'view-bild-events', 'view-acceptance'].every(id => "
                               "window.__draws.slice(n).includes(id))", arg=drawn)
        page.wait_for_function(SETTLED)
        page.wait_for_timeout(300)  # a second draw, were there one, comes 0.1-0.2 s after the first
        draws = page.evaluate("n => window.__draws.slice(n)", drawn)
        assert all(draws.count(figure) == 1 for figure in set(draws)), draws
    context.close()
