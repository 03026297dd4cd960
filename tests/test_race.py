"""The race: lanes take turns by their own clocks, finish in order, and export a report Compare reads
(real tiny models; the page's race is in test_browser.py)."""

from __future__ import annotations

import json

import pytest

import explorer
from explorer import race
from explorer.ui.sections import load_bench_report
from explorer.viz.race import race_html

TINY = "tiny-random:1"
PROMPT = "the cat sat on the mat."


def test_lanes_take_turns_by_their_own_clocks_and_finish_in_order():
    lanes = race.start(TINY, PROMPT, ["speculative:prompt-lookup:2", "none", ""], max_new_tokens=16, chat=False)
    assert [lane.label for lane in lanes] == ["ar (plain decoding)", "speculative:prompt-lookup:2"]
    for _ in race.steps(lanes):
        # the lane just stepped was the one furthest behind: no unfinished lane is ahead of another's
        # clock by more than one round of the slower one
        running = [lane for lane in lanes if not lane.done]
        if len(running) == 2:
            gap = abs(running[0].clock - running[1].clock)
            longest = max(r.timing.total_s for lane in running for r in lane.decoding.rounds)
            assert gap <= longest + 1e-9
    assert sorted(lane.place for lane in lanes) == [1, 2] and all(lane.done for lane in lanes)
    traces = [lane.decoding.trace() for lane in lanes]
    assert traces[0].output_ids == traces[1].output_ids  # lossless: the same text in both lanes
    views = race.snapshot(lanes)
    assert [len(v.tokens) for v in views] == [len(t.output_ids) for t in traces]
    shown = race_html(views, 16)
    assert shown.count("class='race-lane done'") == 2 and "finished 1st" in shown and "the reference" in shown


def test_the_race_report_is_a_benchmark_report():
    lanes = race.run(race.start(TINY, PROMPT, ["speculative:model:tiny-random:2:1"], max_new_tokens=12, chat=False))
    report = race.race_report(lanes)
    checked = load_bench_report(json.dumps(report))  # the Compare view's own checks
    rows = {r["system"]: r for r in checked["rows"]}
    assert set(rows) == {"ar", "speculative:model:tiny-random:2:1"}
    assert rows["ar"]["speedup_vs_ar"] == 1.0 and rows["speculative:model:tiny-random:2:1"]["identical_to_ar"] is True
    ours = lanes[1].decoding.trace().summary
    assert rows["speculative:model:tiny-random:2:1"]["tokens_per_s"] == pytest.approx(ours.tokens_per_s)
    assert checked["meta"]["source"] == "race" and checked["meta"]["prompts"] == 1
    assert checked["meta"]["machine"]["cores"] >= 1 and "kinds" in checked["meta"]["kernels"]
    # acceptance by draft position: accepted ÷ tested at position 1, 2, … of the lane's rounds
    positions = rows["speculative:model:tiny-random:2:1"]["acceptance_by_position"]
    first = [r for r in lanes[1].decoding.rounds if r.drafted]
    assert positions[0] == pytest.approx(sum(r.n_accepted >= 1 for r in first) / len(first))
    assert rows["ar"].get("acceptance_by_position") is None


@pytest.mark.parametrize("systems,message", [
    (["hf-generate"], "Hugging Face's own decoding"),
    (["speculative:prompt-lookup:2", "speculative:prompt-lookup:3", "eesd", "bita"], "at most 3 systems"),
    (["warp-drive"], "unknown system"),
])
def test_impossible_lanes_get_one_line(systems, message):
    with pytest.raises(explorer.ExplorerError, match=message):
        race.parse_lanes(systems)


def test_lane_text_is_escaped():
    view = race.LaneView("<b>x</b>", (("<img src=x onerror=alert(1)>", "accepted"),), 1.0, True, 1, 1, 1)
    shown = race_html([view], 4)
    assert "<img" not in shown and "&lt;img" in shown and "&lt;b&gt;x&lt;/b&gt;" in shown
