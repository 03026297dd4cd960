"""ZeroGPU without a GPU: ``spaces.GPU`` replaced by a recorder that does what a ZeroGPU worker does to a
call — the arguments and the result cross a process boundary (pickled), the worker's memory is gone after
the call, a refused GPU is a ``gr.Error`` titled "ZeroGPU …" — and the page's real handlers run on it.

Checked: every job that decodes is a decorated entry point and the page reaches it; durations are bounded
and follow the request and the measured pace; nothing returned holds a tensor; a refusal is one line that
offers the CPU; the CPU choice and a plain install (``spaces`` present, no ZeroGPU) decode as before."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import pickle
import sys
from types import SimpleNamespace

import gradio as gr
import numpy as np
import pytest
import torch

import explorer
from explorer.methods.suffix.corpus import HISTORY
from explorer.ui import layout, zerogpu
from explorer.ui.baseline import BASELINES

ENTRY_POINTS = {"decode_run", "audit_run", "race_run", "sweep_run", "lab_run", "verify_cost_run"}
QUOTA = gr.Error("You have exceeded your GPU quota (60s requested vs. 12s left). <a href='https://huggingface.co/"
                 "subscribe/pro'>Subscribe to Pro</a> to get more", title="ZeroGPU quota exceeded")


def holds_tensor(value) -> bool:
    """Whether a tensor or an array hides anywhere in ``value`` (containers, dataclasses, objects)."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return True
    if isinstance(value, dict):
        return any(holds_tensor(k) or holds_tensor(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(holds_tensor(v) for v in value)
    if dataclasses.is_dataclass(value):
        return any(holds_tensor(getattr(value, f.name)) for f in dataclasses.fields(value))
    return hasattr(value, "__dict__") and not isinstance(value, type) and holds_tensor(vars(value))


class Recorder:
    """``spaces.GPU`` as ZeroGPU runs it, minus the GPU: what was decorated with which duration, each call
    with the duration it asked for, and the process boundary."""

    def __init__(self):
        self.decorated: dict[str, object] = {}
        self.calls: list[tuple[str, int]] = []
        self.refuse: Exception | None = None

    def GPU(self, task=None, *, duration=None, size=None):  # noqa: N802 (spaces' name)
        assert callable(task) and callable(duration)
        self.decorated[task.__name__] = duration

        def worker(*args, **kwargs):
            self.calls.append((task.__name__, duration(*args, **kwargs)))
            if self.refuse is not None:
                raise self.refuse
            args, kwargs = pickle.loads(pickle.dumps((args, kwargs)))  # into the forked worker
            remembered = copy.deepcopy(HISTORY._outputs)
            try:
                result = task(*args, **kwargs)
            finally:
                HISTORY._outputs = remembered  # the worker's memory does not outlive the call
            assert not holds_tensor(result), f"{task.__name__} returned a tensor"
            return pickle.loads(pickle.dumps(result))  # back to the app's process

        return worker


@pytest.fixture
def zero_gpu(monkeypatch):
    recorder = Recorder()
    monkeypatch.setitem(sys.modules, "spaces", SimpleNamespace(GPU=recorder.GPU))
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    importlib.reload(zerogpu)  # decorates its entry points again, with the recorder
    yield recorder
    monkeypatch.undo()
    importlib.reload(zerogpu)


def event(demo, name: str):
    """The page's handler of that name (as Gradio calls it)."""
    return next(f.fn for f in demo.fns.values() if getattr(f, "name", None) == name)


def page_values(page, **changes) -> dict:
    values = {c: c.value for c in page.run_inputs()}
    values.update({getattr(page, k): v for k, v in changes.items()})
    return values


def request(session: str):
    return SimpleNamespace(session_hash=session)


RUN = {"prompt": "count one two three one two three one two", "model": "tiny-random:1", "method": "speculative",
       "draft": "prompt-lookup:2", "max_new_tokens": 24, "temperature": 0}


def test_every_job_that_decodes_is_an_entry_point_with_a_duration(zero_gpu):
    assert set(zero_gpu.decorated) == set(zerogpu.ENTRY_POINTS) == ENTRY_POINTS


def test_durations_are_bounded_and_follow_the_request_and_the_measured_pace(zero_gpu):
    decode = zerogpu.ENTRY_POINTS["decode_run"]
    short = decode("default", "hi", "s", {"max_new_tokens": 8}, False, [])
    middle = decode("default", "hi", "s", {"max_new_tokens": 256}, True, [])
    longest = decode("default", "hi", "s", {"max_new_tokens": 4096}, True, [])
    assert zerogpu.MIN_DURATION_S <= short < middle <= longest == zerogpu.MAX_DURATION_S
    zerogpu.PACE.add(1.0, 100)  # this Space's GPU measured at 100 tokens a second
    assert decode("default", "hi", "s", {"max_new_tokens": 256}, True, []) < middle
    # a Hub model is fetched inside the call: more time asked for it
    assert decode("hf:HuggingFaceTB/SmolLM2-360M-Instruct", "hi", "s", {"max_new_tokens": 8}, False, []) > short
    others = {
        "audit_run": [("default", "hi", 10, 1.0, {}), ("default", "hi", 5000, 1.0, {})],
        "race_run": [("default", "hi", ["none"], {"max_new_tokens": 8}, []),
                     ("default", "hi", ["suffix", "eesd", "speculative:prompt-lookup:3"], {"max_new_tokens": 4096}, [])],
        "sweep_run": [("early-exit:8", [0.5], [1.0], 8, ["a"]), ("early-exit:8", [0.1] * 9, [1.0] * 9, 96, ["a"] * 9)],
        "lab_run": [([0.9], [1], [0.0], 8, ["a"]), ([0.1] * 9, [1] * 9, [0.0] * 9, 96, ["a"])],
        "verify_cost_run": [(1,), (64,)],
    }
    for name, (small, large) in others.items():
        duration = zerogpu.ENTRY_POINTS[name]
        low, high = duration(*small), duration(*large)
        assert isinstance(low, int) and zerogpu.MIN_DURATION_S <= low <= high <= zerogpu.MAX_DURATION_S, name


def test_a_page_run_decodes_in_one_gpu_call_and_plays_its_rounds(zero_gpu):
    demo = layout.build_demo()
    handlers = event(demo, "run").__wrapped__.__self__
    page = handlers.page
    updates = list(handlers.run(page_values(page, **RUN), request("zero-1")))
    assert [name for name, _ in zero_gpu.calls] == ["decode_run"]
    assert "Waiting for a ZeroGPU GPU" in updates[0][page.status]
    last = updates[-1]
    trace = last[page.trace_state]
    assert len(trace.rounds) > 1 and last[page.playing] is True and last[page.timer].active
    assert last[page.round_slider].value == 1 and "Decoded on a ZeroGPU GPU" in last[page.status]
    baseline = BASELINES.get(trace)  # plain decoding from the same call: greedy, so the same tokens
    assert baseline is not None and baseline.method == "ar" and baseline.output_ids == trace.output_ids
    assert "first divergence" not in last[page.audit]


def test_the_cpu_choice_streams_on_the_cpu_without_a_gpu_call(zero_gpu):
    demo = layout.build_demo()
    handlers = event(demo, "run").__wrapped__.__self__
    page = handlers.page
    updates = list(handlers.run(page_values(page, hardware="CPU", **RUN), request("zero-2")))
    assert zero_gpu.calls == []
    trace = next(u[page.trace_state] for u in reversed(updates) if page.trace_state in u)
    assert trace.device == "cpu" and trace.summary.new_tokens > 0


def test_a_refused_gpu_is_one_line_that_offers_the_cpu_and_keeps_the_page(zero_gpu):
    zero_gpu.refuse = QUOTA
    demo = layout.build_demo()
    handlers = event(demo, "run").__wrapped__.__self__
    page = handlers.page
    last = list(handlers.run(page_values(page, **RUN), request("zero-3")))[-1]
    assert set(last) == {page.status}  # only the status changes: what the page showed stays
    said = last[page.status]
    assert said.startswith("⚠️") and "quota exceeded" in said and "Hardware: CPU" in said
    assert "\n" not in said and "<a" not in said and "href" not in said and "Traceback" not in said
    with pytest.raises(gr.Error, match="no GPU for this run") as raised:  # an API caller gets the same line
        list(handlers.api_decode("Hello", model="tiny-random:1", max_new_tokens=4, request=request("zero-3")))
    assert "<a" not in str(raised.value)


def test_the_api_decodes_in_one_call_and_the_app_keeps_the_sessions_outputs(zero_gpu):
    demo = layout.build_demo()
    handlers = event(demo, "api_decode").__wrapped__.__self__
    said = list(handlers.api_decode("Hello there", method="suffix", draft=None, max_new_tokens=12,
                                    model="tiny-random:1", request=request("zero-4")))
    assert [name for name, _ in zero_gpu.calls] == ["decode_run"]
    trace = explorer.load_trace(said[-1])
    assert trace.method == "suffix" and trace.summary.new_tokens > 0
    kept = HISTORY.export(HISTORY.API_PREFIX + "zero-4")  # the worker's memory is gone; the app kept what it handed back
    assert len(kept) == 1 and kept[0][1] == list(trace.output_ids)
    # the session's errors come back as the one line they were, not as a worker error
    with pytest.raises(gr.Error, match="max_new_tokens"):
        list(handlers.api_decode("Hello", model="tiny-random:1", max_new_tokens=0, request=request("zero-4")))


def test_the_audit_and_the_race_run_in_one_gpu_call_each(zero_gpu):
    demo = layout.build_demo()
    page = event(demo, "run").__wrapped__.__self__.page
    audit = event(demo, "run_audit")
    runs = next(c for c in demo.fns[next(k for k, f in demo.fns.items() if f.name == "run_audit")].inputs
                if getattr(c, "elem_id", "") == "audit-runs")
    values = page_values(page, **RUN) | {runs: 10}
    shown = audit(values, request("zero-5"), progress=lambda *a, **k: None)
    assert [name for name, _ in zero_gpu.calls] == ["audit_run"]
    assert any("χ²" in str(v) for v in shown.values())

    race = event(demo, "run_race")
    inputs = demo.fns[next(k for k, f in demo.fns.items() if f.name == "run_race")].inputs
    lanes = [c for c in inputs if str(getattr(c, "elem_id", "")).startswith("race-lane-")]
    values = {c: c.value for c in inputs} | page_values(page, **RUN)
    values |= {lanes[0]: "speculative:prompt-lookup:2", lanes[1]: "suffix", lanes[2]: "none"}
    updates = list(race(values, request("zero-5")))
    assert [name for name, _ in zero_gpu.calls] == ["audit_run", "race_run"]
    assert len(HISTORY.export("zero-5")) == 1  # the suffix lane's output, kept by the app
    drawn = " ".join(str(v) for u in updates for v in u.values())
    assert "ar (plain decoding)" in drawn and "speculative:prompt-lookup:2" in drawn


def cells(row: str) -> list[str]:
    """A markdown table row's cells, stripped."""
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def test_the_lab_the_sweep_and_the_measured_what_if_run_on_the_gpu(zero_gpu, default_model):
    demo = layout.build_demo()
    quiet = {"progress": lambda *a, **k: None}
    plot, table = event(demo, "run_lab")("0.9", "1", "0", 8, request("zero-6"), **quiet)
    rows = [cells(line) for line in table.splitlines() if line.startswith("| 0.9 | 1 | 0 |")]
    assert len(rows) == 1, table  # the one point asked for: α = 0.9, γ = 1, c = 0
    assert rows[0][6] == rows[0][9] == "1.90"  # eq. 1: (1 − 0.9²)/(1 − 0.9); Thm 3.8 at c = 0 is the same
    assert len(plot.data) >= 1
    plot, table = event(demo, "run_sweep")("early-exit:8", "0.5", "inf", 1, 8, request("zero-6"), **quiet)
    rows = [cells(line) for line in table.splitlines() if line.startswith("| 0.5 | ∞ |")]
    assert len(rows) == 1, table  # the one grid point asked for: α_FB = 0.5, α_RB = ∞
    assert 0 <= float(rows[0][2]) <= 1 and 0 <= float(rows[0][3]) <= 1  # agreement, ROUGE-L
    assert "early-exit:8" in table and "8 new tokens" in table and len(plot.data) >= 1
    from explorer.ui.whatif import EXAMPLE

    analyse = event(demo, "analyse")
    plot, words = analyse(EXAMPLE.read_text(encoding="utf-8"), None, "0.1", "measure", "", False, False, "",
                          request("zero-6"), **quiet)
    assert not words.startswith("⚠️") and "measured" in words
    assert [name for name, _ in zero_gpu.calls] == ["lab_run", "sweep_run", "verify_cost_run"]


def test_with_spaces_installed_and_no_zero_gpu_nothing_changes():
    import spaces

    assert not zerogpu.ON_ZERO_GPU and zerogpu.GPU is spaces.GPU

    def job():
        return 1

    assert spaces.GPU(job) is job  # off ZeroGPU the decorator is a no-op
    assert zerogpu.use_gpu("GPU") is False and zerogpu.device_for("CPU") is None
    demo = layout.build_demo()
    page = event(demo, "run").__wrapped__.__self__.page
    assert page.hardware.visible is False  # the choice shows only on a ZeroGPU Space
    trace = explorer.decode("tiny-random:1", "Hi", max_new_tokens=3)
    assert trace.summary.new_tokens == 3
