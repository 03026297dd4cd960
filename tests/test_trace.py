"""Trace invariants, the JSON round trip and the loader's refusals."""

import gc
import json
import threading
from pathlib import Path

import pytest

import explorer
from explorer.trace import SCHEMA, check_invariants

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def sampled(tiny_target, tiny_draft):
    return explorer.decode(tiny_target, "the cat sat", draft=tiny_draft, gamma=1, temperature=1.0,
                           max_new_tokens=60, seed=1)


def test_invariants_hold_for_every_method(tiny_target, tiny_draft, sampled):
    ar = explorer.decode(tiny_target, "the cat sat", method="ar", max_new_tokens=20)
    lookup = explorer.decode(tiny_target, "abcabcabc", draft="prompt-lookup:2", max_new_tokens=20)
    for trace in (ar, lookup, sampled):
        assert check_invariants(trace) == []
        s = trace.summary
        assert s.accepted <= s.drafted
        assert s.target_forwards == s.rounds  # one verification per round
        assert sum(len(r.emitted) for r in trace.rounds) == s.new_tokens == len(trace.output_ids)
    assert all(len(r.emitted) == 1 and not r.drafted and r.event == "target" for r in ar.rounds)
    assert ar.summary.tokens_per_target_forward == 1.0


def test_round_fields_describe_each_outcome(sampled):
    events = {r.event for r in sampled.rounds}
    assert {"rejected", "all-accepted"} <= events
    for r in sampled.rounds:
        assert all(0 < q <= 1 for q in r.q_drafted)
        if r.event == "rejected":
            assert r.emitted_kind[-1] == "corrected" and r.rejected_at == r.n_accepted
            assert r.residual_top is not None and len(r.uniforms) == r.n_accepted + 1
            assert r.emitted[-1] != r.drafted[r.n_accepted] or r.p_drafted[r.n_accepted] > 0
        if r.event == "all-accepted":
            assert r.emitted_kind[-1] == "bonus" and r.n_accepted == len(r.drafted)
        assert len(r.target_top) == len(r.drafted) + 1
        assert r.timing.draft_s >= 0 and r.timing.verify_s > 0 and r.timing.other_s >= 0


def test_json_round_trip(sampled):
    text = sampled.to_json()
    data = json.loads(text)
    assert data["schema"] == SCHEMA
    for key in ("method", "model", "draft", "settings", "prompt_ids", "output_ids", "text", "rounds", "summary"):
        assert key in data
    assert explorer.load_trace(text) == sampled


def test_reading_and_writing_pause_the_collector_and_restore_it(sampled, monkeypatch):
    """A trace is read and written with the cyclic collector paused (``explorer.gc_pause``: millions of small
    objects), and the collector's state afterwards is what it was before: after a good file, after a refused one,
    when it was off already, and when two threads' pauses overlap."""
    from explorer.trace import read

    seen = []
    reading = read.read_dict
    monkeypatch.setattr(read, "read_dict", lambda *a: seen.append(gc.isenabled()) or reading(*a))
    text = sampled.to_json()
    assert explorer.load_trace(text) == sampled and seen == [False] and gc.isenabled()
    with pytest.raises(explorer.TraceFormatError):
        explorer.load_trace(text.replace('"rounds"', '"r0unds"'))
    assert gc.isenabled()
    gc.disable()
    try:
        explorer.load_trace(text)
        assert not gc.isenabled()
    finally:
        gc.enable()
    from explorer.gc_pause import gc_paused

    inside, leave = threading.Event(), threading.Event()

    def hold():
        with gc_paused():
            inside.set()
            leave.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    inside.wait(10)
    explorer.load_trace(text)  # this pause ends while the other thread's goes on
    assert not gc.isenabled()
    leave.set()
    other.join(10)
    assert gc.isenabled()


@pytest.mark.parametrize("name", ["trace_ar.json", "trace_prompt_lookup.json", "trace_sampled_tiny.json"])
def test_saved_traces_load(name):
    trace = explorer.load_trace((DATA / name).read_text())
    assert trace.rounds and trace.token_text


def _broken(sampled, edit):
    data = json.loads(sampled.to_json())
    edit(data)
    return json.dumps(data)


@pytest.mark.parametrize("make,message", [
    (lambda s: "{not json", "invalid JSON"),
    (lambda s: "[1, 2]", "not an object"),
    (lambda s: json.dumps({"hello": 1}), "no schema field"),
    (lambda s: _broken(s, lambda d: d.update(schema="other/trace@9")), "other/trace@9"),
    (lambda s: _broken(s, lambda d: d.pop("rounds")), "missing field 'rounds'"),
    (lambda s: _broken(s, lambda d: d["rounds"][0].pop("timing")), "timing"),
    (lambda s: _broken(s, lambda d: d.update(output_ids=["a"])), "list of token ids"),
    (lambda s: _broken(s, lambda d: d["rounds"][0].update(surprise=1)), "unknown field"),
    (lambda s: _broken(s, lambda d: d.update(output_ids=d["output_ids"][:-1])), "concatenate"),
    (lambda s: _broken(s, lambda d: d["rounds"][0].update(n_accepted=99)), "accepted 99"),
])
def test_malformed_or_foreign_files_are_refused_clearly(sampled, make, message):
    with pytest.raises(explorer.TraceFormatError, match=message.replace("(", r"\(")):
        explorer.load_trace(make(sampled))
