"""The Compare tab in Chromium (#48): its menu offers every shipped benchmark (bench-quantized.json shipped and was
never offered) and shows the one picked; an uploaded report with a speed-up that is not a fact — a lossless row
faster than its tokens per target forward allow, as `bench --quick` once printed (suffix ×2.99 at 1.48) — shows it
withheld, with the reason, at both widths, and the menu then names no shipped file. No model is loaded."""

from __future__ import annotations

import json

from conftest_ui import open_tab
from playwright.sync_api import expect

from explorer.reports import LATEST, benchmark_label
from explorer.ui.sections import shipped_benchmarks


def test_the_menu_offers_every_shipped_benchmark_and_an_impossible_upload_is_withheld(page, tmp_path):
    offered = shipped_benchmarks()
    open_tab(page, "compare")
    menu = page.locator("#compare-shipped input")
    expect(menu).to_have_value(benchmark_label(LATEST, offered[LATEST]))
    menu.click()
    expect(page.get_by_role("option")).to_have_count(len(offered))
    quantized = benchmark_label("bench-quantized.json", offered["bench-quantized.json"])
    page.get_by_role("option", name=quantized, exact=True).click()
    expect(page.locator("#compare-table")).to_contain_text("quantized:alone")
    expect(page.locator("#compare-plot")).to_contain_text("quantized:alone")

    report = {"rows": [
        {"system": "ar", "tokens_per_s": 29.0, "speedup_vs_ar": 1.0, "lossy": False, "tokens_per_target_forward": 1.0},
        {"system": "suffix", "tokens_per_s": 86.7, "speedup_vs_ar": 2.99, "lossy": False,
         "tokens_per_target_forward": 1.48, "identical_to_ar": True},
    ], "meta": {"model": "default", "prompts": 5, "repeats": 1}}
    path = tmp_path / "busy.json"
    path.write_text(json.dumps(report))
    page.set_input_files("xpath=//button[@id='compare-upload']/preceding-sibling::input[@type='file'][1]", str(path))
    table = page.locator("#compare-table")
    expect(table).to_contain_text("withheld (1)")
    expect(table).to_contain_text("×2.99 is more than a lossless run with 1.48 tokens per target pass can gain")
    expect(page.locator("#compare-plot")).to_contain_text("withheld")
    expect(menu).to_have_value("")
    page.set_viewport_size({"width": 390, "height": 900})
    expect(table).to_contain_text("withheld (1)")
    expect(page.locator("#compare-plot")).to_contain_text("withheld")
