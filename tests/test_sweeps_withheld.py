"""The BiLD and lenience sweeps, like the theory lab, print no speed-up over plain decoding that is not a fact (#48),
from saved reports (no model): a point timed while the machine's pace moved away from plain decoding's, or exact
lenience beating plain decoding by more than its tokens per target forward allow, is "withheld (k)" with a numbered
note naming the point and the reason; a report from before the rule prints as it did."""

from __future__ import annotations

import json

from explorer import sweep
from explorer.shipped import ASSETS


def test_a_lenience_point_timed_at_another_pace_is_withheld_with_its_reason():
    report = json.loads((ASSETS / "sweep-lenience-greedy.json").read_text())
    before = sweep.table("lenience", report)
    assert "withheld" not in before
    report["points"][0]["doubt"] = ("the machine was busy: a fixed test typically took 5.2 ms while this point's runs "
                                    "ran and 1.6 ms while plain decoding did (3.2× apart; other work shared the CPU)")
    table = sweep.table("lenience", report)
    row = next(line for line in table.splitlines() if line.startswith("| 1 |"))
    assert row.endswith("| withheld (1) |") and f"{report['points'][0]['speedup_vs_ar']:.2f} |" not in row
    assert "1. l = 1: the machine was busy: a fixed test typically took 5.2 ms" in table


def test_a_bild_point_timed_at_another_pace_is_withheld_and_the_others_kept():
    points = [{"fallback_threshold": fb, "rollback_threshold": None, "agreement": 0.9, "rouge_l": 0.9,
               "large_forwards_per_token": 0.5, "tokens_per_s": 30.0, "speedup_vs_ar": x, "pareto": True, "doubt": why}
              for fb, x, why in ((0.2, 1.31, None), (0.8, 4.75, "the machine was busy"))]
    table = sweep.table("bild", {"points": points, "meta": {"model": "default", "draft": "early-exit:8", "prompts": 2,
                                                       "max_new_tokens": 24, "max_small_steps": 10,
                                                       "ar_tokens_per_s": 22.0}})
    assert "| 1.31 |" in table and "4.75" not in table and "| withheld (1) |" in table
    assert "1. α_FB = 0.8, α_RB = ∞: the machine was busy." in table
