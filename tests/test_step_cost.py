"""``python -m explorer.tools.step_cost``'s refusals, each one line before any browser starts (its measurement is
exercised by ``test_worst_traces_browser.py``, which uploads and steps through its ``replay`` and ``step``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import explorer
from explorer.tools import step_cost


def refusal(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as exit_:
        step_cost.main([str(a) for a in argv])
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(lines)
    return lines[-1]


def test_it_refuses_what_it_cannot_measure_in_one_line(capsys, tmp_path, tiny_target):
    bild = Path(__file__).parent / "data" / "trace_bild.json"
    assert "--steps must be a whole number from 1 to 500" in refusal(capsys, bild, "--steps", 0)
    assert "--width must be from 320 to 4000 px" in refusal(capsys, bild, "--width", 10)
    assert "no trace file at" in refusal(capsys, tmp_path / "none.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert "cannot be read: " in refusal(capsys, broken)
    one = tmp_path / "one-round.json"
    one.write_text(explorer.decode(tiny_target, "hello", method="ar", max_new_tokens=1).to_json())
    assert "has 1 round(s): stepping needs two or more" in refusal(capsys, one)
