"""No impossible speed-up printed as fact (#42 item 1), from saved traces (no model): a run and its plain decoding
record the machine's pace as they decode (``explorer.pace``); a ratio of the two is shown only where the pace held
and the ratio is possible (``viz.trust``), and otherwise the page, the latency figure, "why this speed" and the
CLI say in plain words why not and where a fair figure comes from. The CPU-load reproduction is in
test_busy_machine.py."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

import explorer
from explorer import pace, viz
from explorer.limits import MAX_PACE_SAMPLES
from explorer.viz.explain import round_cost


def paced(trace, samples):
    return dataclasses.replace(trace, pace_ms=tuple(samples))


def words_of(trace, baseline) -> str:
    """Everything the page and the CLI say of a run against its baseline: the summary, why this speed, the
    latency and theory figures' titles and legends."""
    latency = viz.latency_figure(trace, baseline)
    theory = viz.theory_figure(0.8, 0.1, 0.1, trace, baseline)
    names = [t.name or "" for fig in (latency, theory) for t in fig.data]
    return "\n".join([viz.run_summary(trace, baseline), viz.speed_explanation(trace, baseline),
                      latency.layout.title.text, theory.layout.title.text, *names])


def test_a_steady_pace_keeps_the_ratio(lookup, ar):
    run, base = paced(lookup, [1.6, 1.7, 1.65]), paced(ar, [1.7, 1.62])
    assert viz.speedup_doubt(run, base) is None
    assert viz.measured_speedup(run, base) == pytest.approx(lookup.summary.tokens_per_s / ar.summary.tokens_per_s)
    assert "measured ×" in words_of(run, base)


def test_a_pace_that_changed_prints_no_ratio_and_says_why(lookup, ar):
    run, base = paced(lookup, [1.6, 1.7, 1.65]), paced(ar, [1.7, 4.9, 5.2])  # plain decoding met a busy machine
    doubt = viz.speedup_doubt(run, base)
    assert doubt is not None and viz.measured_speedup(run, base) is None
    text = words_of(run, base)
    assert "measured ×" not in text and "plain steps" not in text and not re.search(r"T\(.*\)/T\(1\) =", text)
    assert "The machine was busy" in text and "unreliable" in text
    assert "the race (Compare tab) measures fairly" in text
    assert "typically took 1.6 ms while this run decoded and 4.9 ms while plain decoding did (3.0× apart" in text
    assert "not comparable" in text  # the baseline's throughput line says it was timed at another pace
    assert "What this run's own clocks say" in text  # what is still true, without plain decoding


def test_an_impossible_ratio_is_not_printed_even_without_pace_samples(lookup, ar):
    """Traces from before the pace was recorded: a lossless run faster than its tokens per target pass allow."""
    slow = dataclasses.replace(ar, summary=dataclasses.replace(ar.summary, tokens_per_s=ar.summary.tokens_per_s / 20))
    assert viz.speedup_doubt(lookup, slow) is not None and viz.measured_speedup(lookup, slow) is None
    text = words_of(lookup, slow)
    assert "measured ×" not in text and "cannot beat plain decoding by more than that" in text
    lossy = dataclasses.replace(lookup, settings=dataclasses.replace(lookup.settings, lossy=True))
    assert viz.speedup_doubt(lossy, slow) is None  # a lossy run may skip the target: no such bound


def test_an_impossible_verification_cost_is_not_printed(lookup, ar):
    """T(k)/T(1) below 1 (the page printed "T(1.1)/T(1) = 0.05") or above k is explained, not shown."""
    slow_steps = tuple(dataclasses.replace(r, timing=dataclasses.replace(r.timing, verify_s=r.timing.verify_s * 20))
                       for r in ar.rounds)
    skewed = dataclasses.replace(ar, rounds=slow_steps)  # the whole-run ratio stays possible, the per-pass one not
    assert round_cost(lookup, skewed).verify_ratio < 1
    text = viz.speed_explanation(lookup, skewed)
    assert not re.search(r"T\(.*\)/T\(1\) =", text) and "below one plain forward" in text
    assert "at the verification cost measured here" not in text
    assert viz.trust.verify_ratio_doubt(13.15, 3) is not None and viz.trust.verify_ratio_doubt(1.4, 3) is None


def test_the_pace_log_probes_between_rounds_and_stays_within_its_bound(monkeypatch):
    ticks = iter(range(10_000))
    monkeypatch.setattr(pace, "probe_ms", lambda: 1.0 + next(ticks) % 3)
    log = pace.PaceLog(every_s=3600)
    log.take(now=True)
    log.take()  # within the hour: no probe
    assert log.samples == [1.0]
    log.every_s = 0
    for _ in range(3 * MAX_PACE_SAMPLES):
        log.take()
    assert len(log.samples) < MAX_PACE_SAMPLES and log.every_s == 0  # thinned, never past the bound
    assert pace.pace_change([1.0, 2.0], [3.0]) == 2.0 and pace.pace_change([], [2.0]) == 1.0
    assert pace.pace_change([23.6, 1.7, 1.6], [1.6, 1.7]) < pace.PACE_TOLERANCE  # a burst at the start: fair
    assert pace.pace_change([1.6, 4.8, 5.0, 4.9], [1.6, 1.7]) > pace.PACE_TOLERANCE  # most of a run loaded


def test_a_watched_run_keeps_its_pace_in_its_file(tiny_target):
    trace = explorer.stream(tiny_target, prompt_ids=[3, 4, 5], method="ar", max_new_tokens=6).watch_pace().run()
    assert len(trace.pace_ms) >= 2 and all(t > 0 for t in trace.pace_ms)  # at its start and its end at least
    assert explorer.load_trace(trace.to_json()).pace_ms == trace.pace_ms
    unwatched = explorer.decode(tiny_target, prompt_ids=[3, 4, 5], method="ar", max_new_tokens=6)
    assert unwatched.pace_ms == ()
    data = trace.to_dict()
    for bad in ([-1.0], ["x"], [1.0] * (MAX_PACE_SAMPLES + 1)):
        with pytest.raises(explorer.ExplorerError, match="pace_ms"):
            explorer.load_trace(json.dumps({**data, "pace_ms": bad}))
