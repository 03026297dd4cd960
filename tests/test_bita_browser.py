"""BiTA in a real browser: its settings appear with the method, and an uploaded BiTA trace shows the tree
linked to the attention mask (hovering a node highlights its row). Screenshot in test-artifacts/."""

from __future__ import annotations

import pytest
from conftest_ui import ARTIFACTS, CHROMIUM, set_number, upload_trace, wait_status
from helpers import DATA

import explorer

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)

from playwright.sync_api import expect  # noqa: E402


def test_bita_settings_follow_the_method(page):
    expect(page.locator("#bita-settings")).to_be_hidden()
    page.locator("#method input").click()
    page.get_by_role("option", name="bita", exact=True).click()
    expect(page.locator("#bita-settings")).to_be_visible()
    expect(page.locator("#bita-tree")).to_contain_text("straightforward")
    expect(page.locator("#method-banner")).to_contain_text("BiTA")


def test_uploaded_bita_trace_links_tree_nodes_to_mask_rows(page):
    trace = explorer.load_trace((DATA / "trace_bita.json").read_text())
    upload_trace(page, DATA / "trace_bita.json")
    wait_status(page, "Replaying an uploaded trace", timeout=30_000)
    view = page.locator("#view-bita-tree")
    expect(view.locator(".bita-svg")).to_be_visible()
    expect(page.locator("#view-bita-rounds .js-plotly-plot")).to_have_count(1)
    last = [r for r in trace.rounds if r.tree["nodes"]][-1]
    set_number(page, "round-slider", last.index + 1)
    expect(view).to_contain_text(f"Round {last.index + 1} ")
    assert view.locator("g.bn-acc").count() == len(last.tree["accepted_path"])
    # every node's label inside its box (#29: labels spilled out of them)
    spilled = view.evaluate("""el => Array.from(el.querySelectorAll('g.bn')).filter(g => {
        const box = g.querySelector('rect').getBoundingClientRect(), text = g.querySelector('text').getBoundingClientRect();
        return text.left < box.left - 0.5 || text.right > box.right + 0.5; }).map(g => g.textContent)""")
    assert not spilled, spilled
    # a mask larger than its box says that it scrolls, and the box draws its scrollbars and a frame
    rows = view.locator(".bita-table tbody tr").count()
    if rows > 16:
        expect(view.locator(".bita-scroll-hint")).to_contain_text(f"{rows} rows")
    box = view.locator(".bita-mask-box")
    assert box.evaluate("el => getComputedStyle(el).overflowY") == "scroll"
    assert box.evaluate("el => getComputedStyle(el).borderTopWidth") == "1px"
    # hover the first candidate node: its row in the mask gets the highlight
    node = next(i for i, p in enumerate(last.tree["positions"]) if p["kind"] == "node")
    row_cell = view.locator(f"tr.hr-{node} > th")
    before = row_cell.evaluate("el => getComputedStyle(el).boxShadow")
    view.locator(f"g.tn-{node}").hover()
    after = row_cell.evaluate("el => getComputedStyle(el).boxShadow")
    assert after != before and "inset" in after
    ARTIFACTS.mkdir(exist_ok=True)
    view.screenshot(path=str(ARTIFACTS / "browser-bita-tree.png"))
