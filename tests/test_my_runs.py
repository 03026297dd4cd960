"""The Compare tab's "your runs": a session's runs against their own plain-decoding baselines, as a report
the Compare view reads (real tiny models; the page's button is in test_browser.py)."""

from __future__ import annotations

import json

import explorer
from explorer.ui.baseline import BASELINES
from explorer.ui.my_runs import runs_report
from explorer.ui.sections import load_bench_report
from explorer.ui.session import SessionRuns

TINY, DRAFT = "tiny-random:1", "model:tiny-random:2:1"


def test_runs_with_a_baseline_become_rows_and_the_others_are_counted():
    plain = explorer.decode(TINY, "the cat", method="ar", max_new_tokens=12, chat=False)
    BASELINES.put(plain)
    ours = explorer.decode(TINY, "the cat", draft=DRAFT, max_new_tokens=12, chat=False)
    orphan = explorer.decode(TINY, "a dog ran", draft=DRAFT, max_new_tokens=7, chat=False)  # no baseline
    report, missing = runs_report([ours, orphan])
    assert missing == 1 and [r["system"] for r in report["rows"]] == [f"run 1: speculative {DRAFT}"]
    row = load_bench_report(json.dumps(report))["rows"][0]
    assert row["speedup_vs_ar"] == ours.summary.tokens_per_s / plain.summary.tokens_per_s
    assert row["identical_to_ar"] is True
    assert runs_report([orphan]) == (None, 1)


def test_each_session_keeps_its_newest_runs_only():
    runs = SessionRuns(per_session=2, sessions=2)
    for k in range(3):
        runs.add("a", k, 1)
    runs.add("b", "x", 1)
    runs.add("c", "y", 1)  # the least recently used session goes
    assert runs.of("a") == [] and runs.of("b") == ["x"] and runs.of("c") == ["y"]
    runs.add("b", "z", 1)
    runs.add("b", "w", 1)
    assert runs.of("b") == ["z", "w"]
    runs.forget("b")
    assert runs.of("b") == []



def test_the_runs_kept_are_bounded_in_bytes():
    """Issue 28, item 3: uploads joined the session's runs with no byte bound (6 uploads: +1.7 GB RSS)."""
    runs = SessionRuns(per_session=20, sessions=8, session_bytes=100, total_bytes=200)
    assert runs.add("a", "first", 60) == 0
    assert runs.add("a", "second", 60) == 1  # 120 > 100: the older goes, and the page is told
    assert runs.of("a") == ["second"]
    assert runs.add("a", "huge", 101) == -1 and runs.of("a") == ["second"]  # past the session's budget: not kept
    runs.add("b", "b1", 90)
    runs.add("c", "c1", 90)  # 60 + 90 + 90 > 200: the session seen longest ago gives way
    assert runs.of("a") == [] and runs.of("b") == ["b1"] and runs.bytes() <= 200