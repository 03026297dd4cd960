"""A trace file's summary rate is its own tokens over its own clock (``trace/invariants.py``): a forged file whose
``wall_s`` is 0 and ``tokens_per_s`` 1e12 printed 1e12 tokens/s on the page; now it is refused on load with one line
naming the figure, and so is a rate that is not ``new_tokens / wall_s`` or tokens decoded in no time. A real trace,
and one whose figures were rounded to six digits, still load."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import explorer
from explorer import viz

DATA = Path(__file__).parent / "data"
INTERNALS = re.compile(r"Traceback|File \"|\b[A-Z]\w*(Error|Exception)\b")


def trace_with(**summary) -> str:
    data = json.loads((DATA / "trace_sampled_tiny.json").read_text())
    assert data["summary"]["new_tokens"] > 0
    data["summary"].update(summary)
    return json.dumps(data)


@pytest.mark.parametrize("forged, named", [
    ({"wall_s": 0, "tokens_per_s": 1e12}, "tokens_per_s is 1000000000000.0 while wall_s is 0 s"),
    ({"wall_s": 0.5, "tokens_per_s": 1e12}, "tokens_per_s is 1000000000000.0, not new_tokens / wall_s"),
    ({"wall_s": 0, "tokens_per_s": None}, "wall_s is 0 s for"),
    ({"tokens_per_s": 0.0}, "tokens_per_s is 0.0, not new_tokens / wall_s"),
])
def test_a_forged_rate_is_refused_in_one_line(forged, named):
    with pytest.raises(explorer.TraceFormatError) as err:
        explorer.load_trace(trace_with(**forged))
    message = str(err.value)
    assert named in message and "\n" not in message and not INTERNALS.search(message), message


def test_a_true_rate_loads_and_the_page_prints_it():
    data = json.loads((DATA / "trace_sampled_tiny.json").read_text())
    s = data["summary"]
    trace = explorer.load_trace(json.dumps(data))
    assert trace.summary.tokens_per_s == pytest.approx(s["new_tokens"] / s["wall_s"])
    rounded = explorer.load_trace(trace_with(wall_s=round(s["wall_s"], 6),
                                             tokens_per_s=float(f"{s['new_tokens'] / round(s['wall_s'], 6):.6g}")))
    summary = viz.run_summary(rounded)
    assert f"{rounded.summary.tokens_per_s:.1f}" in summary, summary
