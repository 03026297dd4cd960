"""The plain-decoding baseline a run is compared with on the page: cached while the machine keeps its
pace, re-measured when it does not (#29 item 3: ×0.13 shown for a run the race measured at ×1.32)."""

from __future__ import annotations

import dataclasses
import math

import explorer
from explorer.pace import PACE_TOLERANCE, probe_ms
from explorer.ui.baseline import BaselineCache


def _runs(tiny_target):
    plain = explorer.decode(tiny_target, prompt_ids=[3, 4, 5], method="ar", max_new_tokens=8)
    run = explorer.decode(tiny_target, prompt_ids=[3, 4, 5], draft="model:tiny-random:2:1", max_new_tokens=8)
    return plain, run


def test_the_machine_test_is_a_positive_time():
    first, again = probe_ms(), probe_ms()
    assert all(math.isfinite(t) and 0 < t < 1000 for t in (first, again))


def test_a_cached_baseline_is_used_only_at_the_pace_it_was_measured_at(tiny_target):
    plain, run = _runs(tiny_target)
    cache = BaselineCache()
    found, words = cache.fresh(run, 1.0)
    assert found is None and "has not run on these settings yet" in words
    cache.put(plain, 1.0)
    found, words = cache.fresh(run, 1.1)
    assert found is plain and "same speed as now" in words and "1.00 ms then, 1.10 ms now" in words
    for pace, said in ((PACE_TOLERANCE * 1.2, "slower"), (1 / (PACE_TOLERANCE * 1.2), "faster")):
        found, words = cache.fresh(run, pace)
        assert found is None and said in words and "measured again right after this run" in words
    assert cache.get(run) is plain  # a run already compared keeps its baseline, whatever the pace now
    cache.put(plain, 3.0)  # re-measured: the new pace is the reference
    assert cache.fresh(run, 3.1)[0] is plain


def test_plain_decoding_is_its_own_baseline_and_a_stopped_one_is_never_kept(tiny_target):
    plain, run = _runs(tiny_target)
    cache = BaselineCache()
    assert cache.fresh(plain, 99.0) == (plain, "")
    stopped = dataclasses.replace(plain, summary=dataclasses.replace(plain.summary, stop_reason="stopped"))
    cache.put(stopped, 1.0)
    assert cache.fresh(run, 1.0)[0] is None
