"""Whose earlier outputs a visitor's ``suffix`` runs draft from, driven in Chromium (issue 40, item 5): the sampling
audit's runs join the visitor's own history, never the one history every page shared (session ``""``)."""

from __future__ import annotations

import pytest
from conftest_ui import CHROMIUM, DECODE_TIMEOUT_MS, open_tab, set_number

from explorer.methods.suffix.corpus import HISTORY

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)

from playwright.sync_api import expect  # noqa: E402


def outputs_by_owner() -> dict[str, int]:
    counts: dict[str, int] = {}
    for (_, owner), kept in HISTORY._outputs.items():
        counts[owner] = counts.get(owner, 0) + len(kept)
    return counts


def test_the_sampling_audit_keeps_its_outputs_in_the_visitors_own_history(page):
    page.locator("#method input").click()
    page.get_by_role("option", name="suffix", exact=True).click()
    open_tab(page, "audit")
    set_number(page, "audit-runs", 10)
    before = outputs_by_owner()
    page.click("#audit-run")
    expect(page.locator("#sampling-audit")).to_contain_text("10 seeded runs", timeout=DECODE_TIMEOUT_MS)
    after = outputs_by_owner()
    assert after.get("", 0) == before.get("", 0)  # nothing joined the history every page used to share
    grown = [owner for owner, n in after.items() if n > before.get(owner, 0)]
    assert len(grown) == 1 and grown[0] and not grown[0].startswith(HISTORY.API_PREFIX)  # the page's own session
    assert after[grown[0]] - before.get(grown[0], 0) == 10  # each run's two tokens, remembered for this visitor
