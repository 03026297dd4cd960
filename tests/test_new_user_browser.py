"""What a new user met (#42), in a real browser (Debian's Chromium, whose machine has no emoji font): a busy
machine's impossible speed-ups, a drafter menu and an example that did not offer what ships, eagle-tree's empty
feature-head view, an upload that answered only on another tab, ``&quot;`` in figures, a phone that hid
dropdown values and cut a table, glyphs drawn as empty boxes, and a sampling audit that could not fail."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from conftest_ui import (ARTIFACTS, CHROMIUM, DECODE_TIMEOUT_MS, UPLOAD_INPUT, choose, choose_draft, choose_plain_run,
                         open_app, open_tab, set_number, wait_compared, wait_status)
from helpers import busy, make_trace

import explorer
from explorer.artifacts import ASSETS

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)

from playwright.sync_api import expect  # noqa: E402

HOSTILE = "a\"<b>&'"
PHONE = {"width": 390, "height": 844}

# every character the page shows against the machine's fonts: a glyph no font has draws as .notdef, the same
# empty box as a private-use code point
MISSING_GLYPHS_JS = """() => {
  const text = document.body.innerText + [...document.querySelectorAll('input, button')]
    .map(e => e.value || e.textContent || '').join('');
  const chars = [...new Set([...text].filter(c => c.codePointAt(0) > 0x7f && !/\\s/.test(c)))];
  const canvas = document.createElement('canvas'); canvas.width = canvas.height = 48;
  const ctx = canvas.getContext('2d');
  const draw = (c) => { ctx.clearRect(0, 0, 48, 48); ctx.font = '32px ' + getComputedStyle(document.body).fontFamily;
                        ctx.fillText(c, 4, 36); return ctx.getImageData(0, 0, 48, 48).data.join(','); };
  const box = draw('\\u{10FFFD}');
  return chars.filter(c => !/[\\u0300-\\u036f\\ufe0e\\ufe0f\\u200b-\\u200d]/.test(c) && draw(c) === box);
}"""

# a dropdown whose value runs under its arrow or past its box (on a phone "prompt-lookup:3" read "prompt-lookup:")
HIDDEN_VALUE_JS = """(id) => {
  const box = document.getElementById(id), input = box.querySelector('input');
  const icon = box.querySelector('.icon-wrap');
  const style = getComputedStyle(input), ctx = document.createElement('canvas').getContext('2d');
  ctx.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const r = input.getBoundingClientRect();
  const end = r.left + parseFloat(style.paddingLeft) + ctx.measureText(input.value).width;
  return {value: input.value, hidden: end > Math.min(r.right, icon ? icon.getBoundingClientRect().left : r.right) + 1};
}"""

FIGURE_TEXTS_JS = "() => [...document.querySelectorAll('.js-plotly-plot text')].map(t => t.textContent)"


def new_page(tab, url, viewport=None):
    """The app opened afresh in this module's tab (``conftest.tab``) at ``viewport`` (1400 × 1000 by default)."""
    return open_app(tab, url, viewport or {"width": 1400, "height": 1000})


def run_and_wait(page, tokens: int, said: str = "tokens/s") -> None:
    """Run, and wait until the status says ``said`` with nothing pending (plain decoding may run after the run)."""
    set_number(page, "max-new-tokens", tokens)
    page.click("#run")
    wait_done(page, said)


def wait_done(page, said: str = "tokens/s") -> None:
    page.wait_for_function("t => { const s = document.querySelector('#status').innerText; "
                           "return s.includes(t) && !/Measuring|Decoding|Loading/.test(s); }", arg=said,
                           timeout=DECODE_TIMEOUT_MS)


def test_the_drafter_menu_and_the_examples_offer_what_ships(tab, url):
    """#42 items 2, 6 and 7: on a phone, the chat example drafts with a shipped exit, the menu lists every
    shipped exit and one untrained exit named so, the chosen value shows whole, no internal file name shows, and
    an exit that does not ship names the ones that do."""
    page = new_page(tab, url, PHONE)
    page.get_by_role("button", name="chat", exact=True).click()
    expect(page.locator("#draft input")).to_have_value("early-exit:8")
    page.locator("#draft input").click()
    offered = page.locator("#draft [role=option]").all_inner_texts()
    exits = [o.replace("✓", "").strip() for o in offered if "early-exit" in o]  # ✓ marks the chosen one
    assert exits == ["early-exit:4", "early-exit:6", "early-exit:8", "early-exit:12", "early-exit:8:untrained"], exits
    page.keyboard.press("Escape")
    for value in ("early-exit:12", "prompt-lookup:3", "early-exit:8:untrained"):
        choose_draft(page, value)
        shown = page.evaluate(HIDDEN_VALUE_JS, "draft")
        assert not shown["hidden"], shown
    choose_draft(page, "early-exit:12")
    run_and_wait(page, 4, "with early-exit:12")
    said = page.inner_text("#status")
    assert "trained exit layer" in said and ".safetensors" not in said and "llama-L30" not in said, said
    choose_draft(page, "early-exit:16")
    run_and_wait(page, 4, "with early-exit:16")
    said = page.inner_text("#status")
    assert "no trained exit ships for 16 layers of this model" in said and "4, 6, 8 and 12" in said, said
    assert "these weights" not in said and "untrained" in said
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "new-user-drafter-390.png"))


def test_views_and_banners_read_the_method_they_show(tab, url):
    """#42 items 3 and 7: eagle-tree, which drafts with the feature head in a tree, is not offered the linear
    feature-head view; beam's banner says what its 004 rule is."""
    page = new_page(tab, url)
    choose(page, "beam")
    expect(page.locator("#method-banner")).to_contain_text("Tulsian")
    choose(page, "eagle-tree")
    expect(page.locator("#method-banner")).not_to_contain_text("Tulsian")  # the page took the choice
    run_and_wait(page, 8)
    expect(page.locator("#status")).to_contain_text("eagle-tree")
    expect(page.locator("#view-box-eagle-tree:visible").first).to_be_visible(timeout=30_000)
    assert page.locator("#view-box-feature-head:visible").count() == 0


def hostile_trace(tiny, tmp_path):
    """A 300-round Thompson-sampling trace (its views draw every 2nd round) and a beam trace from the tiny models,
    every token's text hostile."""
    ts = make_trace("beta-ts", [(4, 2), (4, 4), (4, 0)] * 100)
    ts = dataclasses.replace(ts, token_text={100: HOSTILE, 101: HOSTILE, 7: HOSTILE})
    beam = explorer.decode(tiny, prompt_ids=[3, 4, 5, 3, 4], method="beam", draft="model:tiny-random:2:1",
                           max_new_tokens=10)
    beam = dataclasses.replace(beam, token_text={k: HOSTILE for k in beam.token_text})
    paths = {}
    for name, trace in (("ts", ts), ("beam", beam)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(trace.to_json())
    return paths


def figure_entities(page) -> list[str]:
    return [t for t in page.evaluate(FIGURE_TEXTS_JS) if re.search(r"&(#\w+|[a-z]+);", t)]


def test_an_upload_answers_on_the_traces_tab_and_figures_show_text_as_typed(tab, url, tiny_target, tmp_path):
    """#42 items 4, 5 and 7: the Traces tab says what it loaded, or why not, where the upload was made; the figures
    show a stranger's quote, tag and ampersand as typed (no &quot;, no bold); a view that thins its rounds says
    "every 2nd"."""
    paths = hostile_trace(tiny_target, tmp_path)
    page = new_page(tab, url)
    open_tab(page, "traces")
    page.set_input_files(UPLOAD_INPUT, str(paths["ts"]))
    note = page.locator("#trace-upload-status")
    expect(note).to_contain_text("Replaying", timeout=60_000)
    expect(note).to_contain_text("300 rounds")
    expect(note).to_contain_text("Watch")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "nonsense"}))
    page.set_input_files(UPLOAD_INPUT, str(bad))
    expect(note).to_contain_text("not a spec-explorer trace")
    expect(note).to_contain_text("your current trace is kept")
    open_tab(page, "watch")
    expect(page.locator("#view-acceptance")).to_contain_text("every 2nd of 300 rounds drawn")
    set_number(page, "round-slider", 2)
    page.wait_for_timeout(1500)
    texts = page.evaluate(FIGURE_TEXTS_JS)
    assert any(HOSTILE in t for t in texts), texts[:40]  # shown whole: its <b> neither drawn nor dropped
    assert not figure_entities(page), figure_entities(page)
    open_tab(page, "traces")
    page.set_input_files(UPLOAD_INPUT, str(paths["beam"]))
    expect(note).to_contain_text("beam", timeout=60_000)
    open_tab(page, "watch")
    expect(page.locator("#view-beam-tree .js-plotly-plot")).to_have_count(1, timeout=30_000)
    page.wait_for_timeout(1500)
    assert not figure_entities(page), figure_entities(page)
    assert any(HOSTILE in t for t in page.evaluate(FIGURE_TEXTS_JS))
    open_tab(page, "understand")  # What if: a label with a quote in the legend
    metrics = (ASSETS / "whatif" / "vllm-metrics-example.txt").read_text(encoding="utf-8")
    metrics = metrics.replace('model_name="', 'model_name="say \\"hi\\" ')
    page.locator("#whatif-text textarea").fill(metrics)
    page.click("#whatif-run")
    expect(page.locator("#whatif-plot")).to_contain_text('model_name=say "', timeout=60_000)  # not &quot;
    assert not figure_entities(page), figure_entities(page)


def test_a_phone_shows_dropdown_values_and_the_whole_accept_table(tab, url):
    """#42 items 6 and 7: at 390 px the race's lanes show their systems whole, Understand's accept/reject table
    keeps its verdict column in view, and a one-prompt race's figure says "1 prompt × 1 repeat"."""
    page = new_page(tab, url, PHONE)
    choose_plain_run(page)  # a run with drafts, some refused: the table's verdicts
    run_and_wait(page, 16)
    open_tab(page, "understand")
    verdicts = page.evaluate("""() => [...document.querySelectorAll('#guided-round td[class^=verdict]')].map(td => {
        const r = td.getBoundingClientRect(), t = td.closest('table').getBoundingClientRect();
        return {text: td.innerText, right: r.right, visible: Math.min(t.right, window.innerWidth)}; })""")
    assert verdicts and all(v["right"] <= v["visible"] + 1 for v in verdicts), verdicts
    page.screenshot(path=str(ARTIFACTS / "new-user-guide-390.png"))
    open_tab(page, "compare")
    for lane in ("race-lane-2", "race-lane-3"):
        shown = page.evaluate(HIDDEN_VALUE_JS, lane)
        assert not shown["hidden"], shown
    for lane in ("race-lane-3", "race-lane-4"):
        page.locator(f"#{lane} input").fill("none")
        page.locator(f"#{lane} input").press("Enter")
    page.click("#race-run")
    expect(page.locator("#race-download")).to_be_enabled(timeout=DECODE_TIMEOUT_MS)
    expect(page.locator("#compare-plot")).to_contain_text("1 prompt", timeout=30_000)
    title = page.evaluate("() => document.querySelector('#compare-plot .gtitle').textContent")
    assert re.search(r"1 prompt ×\s*1\s*repeat$", title), title  # a phone wraps it into lines joined without a space
    page.screenshot(path=str(ARTIFACTS / "new-user-race-390.png"))


def test_every_glyph_on_the_page_has_a_font(tab, url):
    """#42 item 8: this machine has no emoji font, as many do not; nothing the page shows may be an empty box
    (⏭ on Next refusal, ✅ in the audit, ⏳ while decoding, ⏸ on Pause were)."""
    page = new_page(tab, url)
    set_number(page, "max-new-tokens", 16)
    page.click("#run")
    page.wait_for_function("() => /Decoding|Measuring|Loading/.test(document.querySelector('#status').innerText)")
    missing = set(page.evaluate(MISSING_GLYPHS_JS))  # while decoding
    wait_done(page)
    page.click("#play-rounds")  # its label turns to Pause
    missing |= set(page.evaluate(MISSING_GLYPHS_JS))
    page.click("#play-rounds")
    for name in ("understand", "compare", "audit", "traces", "watch"):
        open_tab(page, name)
        missing |= set(page.evaluate(MISSING_GLYPHS_JS))
    assert not missing, sorted(missing)


def test_an_audit_that_cannot_fail_says_so(tab, url):
    """#42 items 9 and 7: the code example's first token is near-certain; 20 runs all draw it and the page says the
    test cannot fail and what would give it power, in whole sentences."""
    page = new_page(tab, url)
    page.get_by_role("button", name="code", exact=True).click()
    open_tab(page, "audit")
    set_number(page, "audit-runs", 20)
    page.click("#audit-run")
    words = page.locator("#sampling-audit")
    expect(words).to_contain_text("Sampling audit", timeout=DECODE_TIMEOUT_MS)
    said = words.inner_text()
    if "cannot fail" in said:  # the code example's first token, as the issue saw it
        assert "Consistent" not in said and re.search(r"set the temperature to \d|run at least \d+ runs", said), said
    assert "In all 20 runs" in said or " of the 20 runs the target " in said, said
    assert "degrees of freedom" not in said or not re.search(r"\b1 degrees", said)


def test_a_busy_machine_prints_no_impossible_figure_on_the_page(tab, url):
    """#42 item 1, on the page: busy loops start as plain decoding is measured after a quiet run."""
    page = new_page(tab, url)
    page.get_by_role("button", name="code", exact=True).click()
    # settings no other test measured plain decoding on, and long enough that the load covers most of it: plain
    # decoding's 47 tokens take ≥ 1.5 s at 30 tokens/s (the fastest CPU of our kind) and more under the load, which
    # starts within ~0.2 s of the page saying so (95 tokens took 26 s here, for the same proof)
    set_number(page, "max-new-tokens", 47)
    page.click("#run")
    wait_status(page, "Measuring plain decoding")
    with busy():
        compared = wait_compared(page)
    said = page.inner_text("#status") + page.inner_text("#why-speed")
    title = page.evaluate("() => document.querySelector('#latency-plot .gtitle').textContent")
    assert not compared and "unreliable" in said and "race" in said, said
    assert "measured ×" not in said + title and not re.search(r"T\([0-9.]+\)/T\(1\) =", said), said
    page.screenshot(path=str(ARTIFACTS / "new-user-busy-1400.png"), full_page=True)
