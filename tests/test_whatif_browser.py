"""The Understand tab's "What if" block in Chromium: the example, an uploaded llama.cpp file with its draft
length, a bad file that gets one line and keeps the chart, a stranger's label shown as text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest_ui import CHROMIUM

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
UPLOAD = "xpath=//button[@id='whatif-upload']/preceding-sibling::input[@type='file'][1]"

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)

from playwright.sync_api import expect  # noqa: E402


@pytest.fixture(scope="module")
def page(browser, url):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#run")
    page.click("#tab-understand-button")
    expect(page.locator("#whatif-run")).to_be_visible()
    yield page
    context.close()


def chart_title(page) -> str:
    return page.locator("#whatif-plot .gtitle").first.text_content()


def test_the_example_draws_both_panels_and_says_what_to_change(page):
    page.click("#whatif-example")
    expect(page.locator("#whatif-words")).to_contain_text("Set num_speculative_tokens to 4", timeout=30_000)
    assert "best γ = 4" in chart_title(page)
    assert page.locator("#whatif-plot .bars path").count() >= 5  # a bar per draft position
    page.locator("#whatif-cost textarea, #whatif-cost input").first.fill("0.1")
    page.click("#whatif-run")
    expect(page.locator("#whatif-words")).to_contain_text("Set num_speculative_tokens to 3", timeout=30_000)
    page.check("#whatif-shipped input")
    page.click("#whatif-run")
    expect(page.locator("#whatif-words")).to_contain_text("explorer · speculative:prompt-lookup:3", timeout=30_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#whatif-plot").screenshot(path=str(ARTIFACTS / "whatif-1400.png"))
    page.uncheck("#whatif-shipped input")


def test_an_uploaded_llama_cpp_file_then_a_bad_one_keeps_the_chart(page, tmp_path):
    timings = tmp_path / "timings.json"
    timings.write_text(json.dumps({"model": "<b>qwen</b>.gguf", "timings": {
        "predicted_n": 665, "draft_n": 604, "draft_n_accepted": 515}}))
    page.locator("#whatif-gamma textarea, #whatif-gamma input").first.fill("16")
    page.locator("#whatif-cost textarea, #whatif-cost input").first.fill("0.05")
    page.set_input_files(UPLOAD, str(timings))
    words = page.locator("#whatif-words")
    expect(words).to_contain_text("Set --draft-max to", timeout=30_000)
    expect(words).to_contain_text("<b>qwen</b>.gguf")  # the label as typed, not markup
    assert page.locator("#whatif-words b", has_text="qwen").count() == 0
    before = chart_title(page)
    bad = tmp_path / "bad.txt"
    bad.write_text('vllm:spec_decode_num_drafts_total{model_name="m"} -5.0\n')
    page.set_input_files(UPLOAD, str(bad))
    expect(words).to_contain_text("must be a finite count", timeout=30_000)
    expect(words).to_contain_text("Set --draft-max to")  # the earlier analysis stays under the reason
    assert chart_title(page) == before


def test_a_file_that_used_to_raise_gets_its_one_line(page, tmp_path):
    """Issue 40, item 4: llama.cpp timings with predicted_n 0 divided by zero, and the page showed a bare "Error"."""
    bad = tmp_path / "timings.json"
    bad.write_text('{"timings": {"draft_n": 5, "draft_n_accepted": 0, "predicted_n": 0}}')
    page.set_input_files(UPLOAD, str(bad))
    expect(page.locator("#whatif-words")).to_contain_text("none generated (predicted_n = 0)", timeout=30_000)
    assert page.locator(".toast-body.error, .toast-wrap .error").count() == 0
