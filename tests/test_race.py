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


def test_the_menu_offers_the_copy_alone_and_its_lane_is_marked_lossy_with_what_it_kept():
    """#48: `quantized:alone` had to be typed, and its lane was underlined as the target's with no lossy marker."""
    assert "quantized:alone" in race.race_systems()
    lanes = race.run(race.start(TINY, PROMPT, ["quantized:alone"], max_new_tokens=12, chat=False))
    views = race.snapshot(lanes)
    copy = views[1]
    assert copy.lossy and copy.copy_alone and {k for _, k in copy.tokens} == {"copy"}
    plain = [t for r in lanes[0].decoding.rounds for t in r.emitted]
    ours = [t for r in lanes[1].decoding.rounds for t in r.emitted]
    assert copy.agreement == pytest.approx(sum(a == b for a, b in zip(ours, plain)) / len(plain))
    assert len(copy.pace_ms) >= 2 and len(views[0].pace_ms) >= 2  # every lane records the machine's pace
    shown = race_html(views, 12)
    assert "(the 4-bit copy alone)" in shown and "race-lossy" in shown and "of plain decoding's tokens kept" in shown
    assert "race-tok race-copy" in shown and "race-tok race-target" in shown.split("quantized:alone")[0]
    row = {r["system"]: r for r in race.race_report(lanes)["rows"]}["quantized:alone"]
    assert row["lossy"] is True and row["pace_ms"] == list(lanes[1].decoding.trace().pace_ms)


def test_a_lanes_ratio_is_withheld_where_the_pace_moved_or_it_cannot_be():
    """The same race gave quantized ×1.48 and ×4.90 five minutes apart on a busy machine (#48)."""
    def lane(label, tokens, clock, pace, per_pass=None, lossy=False):
        return race.LaneView(label, (("a", "accepted"),) * tokens, clock, True, 1, tokens, tokens, lossy=lossy,
                             pace_ms=pace, per_pass=per_pass)

    plain = lane("ar (plain decoding)", 10, 1.0, (1.6, 1.6, 1.7))
    steady = race_html([plain, lane("quantized", 10, 0.5, (1.6, 1.7, 1.6), per_pass=8.0)], 10)
    assert "×2.00 plain decoding" in steady and "withheld" not in steady
    busy = race_html([plain, lane("quantized", 10, 0.5, (5.9, 6.1, 6.0), per_pass=8.0)], 10)
    assert "×2.00" not in busy and "× plain decoding withheld" in busy and "The machine was busy" in busy
    impossible = race_html([plain, lane("suffix", 10, 0.2, (1.6, 1.6, 1.6), per_pass=1.5)], 10)
    assert "×5.00 plain decoding" not in impossible and "withheld" in impossible  # said as why, never as a fact
    assert "1.50 tokens per target pass" in impossible
    lossy = race_html([plain, lane("quantized:alone", 10, 0.2, (1.6, 1.6, 1.6), lossy=True)], 10)
    assert "×5.00 plain decoding" in lossy  # a lossy lane may skip the target: no bound from its passes
