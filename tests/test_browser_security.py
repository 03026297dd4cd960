"""Script injection through a shared trace, tried in a real browser (Debian's Chromium via Playwright).

A forged trace puts an ``<img onerror>`` handler (and attribute / Markdown break-outs) into every field
that is free text in a valid trace: model, draft, draft_about, prompt, text and every token's text. The
page must show the text literally and no handler may run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest_ui import CHROMIUM, upload_trace

DATA = Path(__file__).parent / "data"

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)

from playwright.sync_api import expect  # noqa: E402

# each payload counts its runs in window.__xss; one closes an attribute first, one is Markdown
PAYLOADS = (
    "<img src=x onerror=\"window.__xss=(window.__xss||0)+1\">",
    "`'\"><img src=x onerror=window.__xss=(window.__xss||0)+1>",
    "![x](javascript:window.__xss=1) <svg onload=window.__xss=1>",
)


def forged(name: str, payload: str) -> dict:
    data = json.loads((DATA / name).read_text())
    for field in ("model", "draft", "draft_about", "prompt", "text"):
        data[field] = f"{field} {payload}"
    data["token_text"] = {k: f"{v}{payload}" for k, v in data["token_text"].items()}
    return data


@pytest.fixture(scope="module")
def page(browser, url):
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#run")
    yield page
    context.close()


# each trace with its method's HTML view, which draws token text itself
TRACES = {"trace_bild.json": "view-bild-tokens", "trace_bita.json": "view-bita-tree", "trace_prompt_lookup.json": None}


@pytest.mark.parametrize("name", list(TRACES))
@pytest.mark.parametrize("payload", PAYLOADS, ids=["img", "attribute", "markdown"])
def test_a_forged_trace_shows_its_text_and_runs_nothing(page, tmp_path, name, payload):
    import explorer

    data = forged(name, payload)
    explorer.load_trace(json.dumps(data))  # the forgery is a valid trace: only escaping stands in the way
    path = tmp_path / f"forged-{name}"
    path.write_text(json.dumps(data))
    page.evaluate("window.__xss = undefined")
    upload_trace(page, path)
    # The page is shared with the previous case, whose status also says "Replaying an uploaded trace":
    # wait for this trace's own method and payload, or a slow replay reads the previous one.
    status = page.locator("#status")
    expect(status).to_contain_text(f"{data['method']} with draft {payload}", timeout=30_000)
    expect(status).to_contain_text(f"model {payload}", timeout=30_000)  # literal, all of it
    expect(page.locator("#tokens")).to_contain_text(payload)
    if TRACES[name]:
        expect(page.locator(f"#{TRACES[name]}")).to_contain_text(payload.split(" ")[0])
    page.wait_for_timeout(500)  # an image error handler fires asynchronously
    assert page.evaluate("window.__xss") is None
    assert page.locator("#status img, #tokens img, .method-view img, #status svg[onload]").count() == 0
