"""Round two of the adversarial probe (issue 28): each item that broke has a test that failed on the main
it was found on. Views survive every legal trace, errors are one clipped line, names never become links or
file names too long to write."""

from __future__ import annotations

import dataclasses

import pytest

import explorer
from explorer import viz
from explorer.run import summarize
from explorer.errors import ExplorerError
from explorer.ui.inputs import decode_options


@pytest.fixture(scope="module")
def beam_trace(default_model):
    """A real beam search (exact rule) with a last round that emits nothing, as the search wrote its rounds
    after the winner had finished before it ran on the round driver (issue 25): such files are legal."""
    trace = explorer.decode(default_model, "Name three colours.", method="beam", draft="early-exit:4", beam_width=3,
                            gamma=2, max_new_tokens=24)
    last = trace.rounds[-1]
    empty = dataclasses.replace(last, index=len(trace.rounds), context_len=len(trace.prompt_ids) + len(trace.output_ids),
                                drafted=(), q_drafted=(), p_drafted=(), n_accepted=0, emitted=(), emitted_kind=(),
                                p_emitted=(), rejected_at=None, event="no-draft")
    rounds = trace.rounds + (empty,)
    trace = dataclasses.replace(trace, rounds=rounds, summary=summarize(rounds, trace.summary.record_s, "eos"))
    assert explorer.load_trace(trace.to_json()) == trace and not trace.rounds[-1].emitted
    return trace


def test_every_view_draws_every_round_of_a_beam_trace_with_empty_rounds(beam_trace):
    """Item 2: rounds that emit nothing divided by zero in the round detail (the page stuck on stepping)."""
    empty = [i for i, r in enumerate(beam_trace.rounds) if not r.emitted]
    assert empty
    for i in range(len(beam_trace.rounds)):
        viz.round_detail_figure(beam_trace, i)
        viz.token_html(beam_trace, i)
        viz.guided_round_html(beam_trace, i)
        viz.round_caption(beam_trace, beam_trace.rounds[i])
        for view in viz.views_for(beam_trace):
            view.render(beam_trace, i)
    figure = viz.round_detail_figure(beam_trace, empty[0])
    assert "added no token" in figure.layout.annotations[0].text


def test_a_long_draft_name_gives_a_trace_file_and_a_report_row(tiny_target, tmp_path, monkeypatch):
    """Item 7: a draft name past ≈ 215 characters raised `File name too long`; past ≈ 190 it broke
    "your runs"."""
    from explorer.ui import trace_files
    from explorer.ui.my_runs import runs_report
    from explorer.ui.baseline import BASELINES
    from explorer.reports import load_bench_report
    import dataclasses
    import json

    monkeypatch.setattr(trace_files, "TRACE_DIR", tmp_path)
    trace = explorer.decode(tiny_target, prompt_ids=[3, 4, 5], draft="model:tiny-random:2:1", max_new_tokens=8)
    long = dataclasses.replace(trace, draft="model:" + "x" * 900)
    path = trace_files.write_trace_file(long, "session-1")
    assert path.is_file() and len(path.name.encode()) < 255
    monkeypatch.setattr(BASELINES, "get", lambda t: trace)
    report, missing = runs_report([long])
    assert missing == 0 and load_bench_report(json.dumps(report))["rows"][0]["system"].endswith("…")


@pytest.mark.parametrize("spec", ["tiny-random:99999999999999999999999", "tiny-random:-1", "tiny-random:1:99",
                                  "tiny-random:" + "9" * 5000])
def test_impossible_tiny_random_specs_get_one_line(spec):
    """Item 7: a seed past 2^63 overflowed torch's generator (a traceback in the CLI)."""
    with pytest.raises(ExplorerError) as err:
        explorer.load(spec)
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


@pytest.mark.parametrize("field, value", [("draft", 123), ("method", ["speculative"]), ("controller", 4.5),
                                          ("gamma", "x" * 100_000), ("seed", "9" * 100_000)])
def test_wrong_types_and_huge_values_get_one_clipped_line(field, value):
    """Items 7 and 8: API draft=123 was a generic error; a 100 000-character value was echoed whole."""
    values = {"method": "speculative", "draft": "early-exit:4", "gamma": 4, "controller": None, "temperature": 0,
              "top_k": 0, "top_p": 1.0, "max_new_tokens": 8, "seed": 0, field: value}
    with pytest.raises(ExplorerError) as err:
        decode_options(**values)
    message = str(err.value)
    assert "\n" not in message and len(message) <= 300, len(message)


def test_a_strangers_text_is_never_a_link():
    """Item 8: bare URLs in trace strings became clickable target=_blank links."""
    shown = viz.safe_markdown("draft from http://evil.example/x, www.evil.example or me@evil.example")
    assert "://" not in shown and "www." not in shown and "@evil.example" not in shown


def test_the_model_cache_counts_what_models_cost_and_how_many():
    """Item 4: the budget counted parameters only (a 16-layer tiny model: 0.6 MB counted, ≈ 2.2 MB of RSS),
    so 4096 MB admitted ≈ 6 800 of them (≈ 15 GB)."""
    from collections import OrderedDict

    from explorer import api

    kept = OrderedDict(api._LOADED)
    try:
        first = api.load_cached("tiny-random:7001:16", None, None)
        tensors = {t.data_ptr(): t for t in first.model.parameters()}
        assert api.model_bytes(first) >= sum(t.numel() * t.element_size() for t in tensors.values())
        for k in range(api.MAX_CACHED_MODELS + 8):
            api.load_cached(f"tiny-random:{7100 + k}:2", None, None)
            assert len(api._LOADED) <= api.MAX_CACHED_MODELS
    finally:  # the session's default model stays cached for the other tests
        api._LOADED.clear()
        api._LOADED.update(kept)


def test_a_compact_upload_downloads_again_no_larger():
    """Item 8: a 29.2 MB compact upload re-downloaded as 36.96 MB, past the upload cap."""
    import json
    from pathlib import Path

    text = (Path(__file__).parent / "data" / "trace_bita.json").read_text()
    compact = json.dumps(json.loads(text), separators=(",", ":"))
    assert len(explorer.load_trace(compact).to_json()) <= len(compact)


def _data(name: str) -> dict:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).parent / "data" / name).read_text())


def test_theta_lists_longer_than_the_draft_steps_are_refused(tiny_target):
    """Item 5: a cali-ts trace carried 65 θ a round (never compared with γ): 4.8 s a step, 45 s in Chromium."""
    import json

    trace = explorer.decode(tiny_target, prompt_ids=[3, 4, 5], draft="model:tiny-random:2:1", controller="beta-ts",
                            gamma=4, max_new_tokens=24)
    data = json.loads(trace.to_json())
    assert explorer.load_trace(json.dumps(data)).rounds  # as written: accepted
    drafting = next(r for r in data["rounds"] if r["controller"].get("theta"))
    drafting["controller"]["theta"] = [0.5] * 65
    with pytest.raises(explorer.TraceFormatError, match="at most 5 draft-step decisions"):
        explorer.load_trace(json.dumps(data))


def test_the_posterior_view_draws_a_bounded_number_of_thetas(tiny_target):
    """A legal run with thousands of θ: the view draws at most MAX_THETA_MARKS and says it thinned them."""
    import dataclasses

    from explorer.viz.views.ts import MAX_THETA_MARKS, posterior_figure

    trace = explorer.decode(tiny_target, prompt_ids=[3, 4, 5], draft="model:tiny-random:2:1", controller="beta-ts",
                            gamma=8, max_new_tokens=48)
    many = dataclasses.replace(trace, rounds=tuple(dataclasses.replace(r, index=i) for i, r in
                                                   enumerate(trace.rounds * (4 * MAX_THETA_MARKS // len(trace.rounds)))))
    fig = posterior_figure(many, 0)
    thetas = next(t for t in fig.data if t.name and t.name.startswith("sampled θ"))
    assert len(thetas.x) <= MAX_THETA_MARKS + 65 and "shown" in thetas.name


def test_a_maximal_tree_draws_a_bounded_mask():
    """Item 5: a legal BiTA round with 1 024 inputs made a 1.3 M-cell mask table (17.6 s a step)."""
    import json

    from explorer.viz.views.tree import MAX_MASK_DRAWN, tree_html

    data = _data("trace_bita.json")
    r = next(r for r in data["rounds"] if r.get("tree"))
    n = 1000
    tree = r["tree"]
    tree["nodes"] = [{"token": 5, "parent": -1, "depth": 1, "rank": i, "accepted": False, "q": 0.001} for i in range(n)]
    tree["positions"] = [{"kind": "node", "node": i} for i in range(n)]
    tree["attention"] = ["1" * n] * n
    tree["sees_prompt"] = [True] * n
    tree["accepted_path"], tree["next_group"] = [], -1
    r["n_accepted"], r["drafted"], r["q_drafted"], r["p_drafted"] = 0, [], [], []
    r["uniforms"], r["draft_top"] = [], []
    try:
        trace = explorer.load_trace(json.dumps(data))
    except explorer.TraceFormatError as err:
        pytest.skip(f"the forged round is not a legal one here: {err}")
    index = next(i for i, x in enumerate(trace.rounds) if x.tree and len(x.tree["nodes"]) == n)
    page = tree_html(trace, index)
    cells = page.count("<td class='on") + page.count("<td class='off")
    assert cells <= (MAX_MASK_DRAWN + 8) ** 2  # + the context's few columns; was 1 000 × 1 000
    assert f"the first {MAX_MASK_DRAWN}" in page


def test_upload_folders_are_trimmed_to_their_budget(tmp_path):
    """Item 6: Gradio kept eight 32 MB uploads for ≈ 2 h with nothing bounding their total."""
    import os
    import time

    from explorer.ui import disk

    gradio, traces = tmp_path / "gradio", tmp_path / "traces"
    now = time.time()
    for k in range(8):  # eight uploads of 1 000 bytes, a minute apart, the oldest first
        folder = gradio / f"hash{k}"
        folder.mkdir(parents=True)
        (folder / "upload.json").write_bytes(b"x" * 1000)
        os.utime(folder / "upload.json", (now - 600 + 60 * k, now - 600 + 60 * k))
    (traces / "s").mkdir(parents=True)
    (traces / "s" / "old.json").write_bytes(b"y" * 10)
    os.utime(traces / "s" / "old.json", (now - 7200, now - 7200))  # past the age limit: goes whatever the budget
    held = disk.trim([gradio, traces], budget=3500, now=now)
    left = sorted(p.parent.name for p in gradio.rglob("*.json"))
    assert held <= 3500 and left == ["hash5", "hash6", "hash7"]  # the newest kept
    assert not (traces / "s" / "old.json").exists() and not (gradio / "hash0").exists()  # empty folders go too


def test_the_trim_follows_no_link_and_deletes_none(tmp_path):
    """A link in the upload folder (to a file or a folder elsewhere) is neither counted nor deleted, nor is what it
    points at: the trim walks the folders themselves, and nothing outside them is its to delete."""
    import os
    import time

    from explorer.ui import disk

    outside, gradio = tmp_path / "outside", tmp_path / "gradio"
    (outside / "inner").mkdir(parents=True)
    (outside / "big.bin").write_bytes(b"z" * 5000)
    (outside / "inner" / "old.bin").write_bytes(b"z" * 5000)
    os.utime(outside / "inner" / "old.bin", (time.time() - 2 * disk.MAX_AGE_S,) * 2)
    (gradio / "hash").mkdir(parents=True)
    (gradio / "hash" / "mine.json").write_bytes(b"x" * 100)
    (gradio / "hash" / "to-a-file").symlink_to(outside / "big.bin")
    (gradio / "to-a-folder").symlink_to(outside / "inner", target_is_directory=True)
    assert disk.trim([gradio], budget=1000) == 100  # only the folder's own file is counted
    assert (outside / "big.bin").exists() and (outside / "inner" / "old.bin").exists()
    assert (gradio / "hash" / "to-a-file").is_symlink() and (gradio / "hash" / "mine.json").exists()


def test_the_served_app_trims_and_a_closed_page_loses_its_copies(monkeypatch, tmp_path):
    import os
    import time

    from conftest_ui import served_app

    from explorer.ui import disk

    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    stale = tmp_path / "abc" / "stale-upload.json"
    stale.parent.mkdir()
    stale.write_text("{}")
    os.utime(stale, (time.time() - 2 * disk.MAX_AGE_S,) * 2)
    copy = tmp_path / "def" / "trace-ar-none-1.json"
    copy.parent.mkdir()
    copy.write_text("{}")
    with served_app():
        deadline = time.monotonic() + 3 * disk.EVERY_S
        while stale.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not stale.exists()  # the trimmer runs beside the served app
    disk.forget_copies(["trace-ar-none-1.json"])
    assert not copy.exists() and not copy.parent.exists()


def test_two_sessions_files_of_the_same_second_are_forgotten_apart(tmp_path, monkeypatch):
    """Two visitors' races in one second were both ``race-<time>.json``: one closing the page deleted the other's
    copy (copies are forgotten by name), and the other's download link stopped answering."""
    from explorer.ui import disk, trace_files

    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    monkeypatch.setattr(trace_files.time, "strftime", lambda *_: "20261205-120000")  # the same second
    names = {session: trace_files.offered_name("race", session) for session in ("visitor-a", "visitor-b")}
    for session, name in names.items():
        (tmp_path / session).mkdir()
        (tmp_path / session / name).write_text("{}")
    disk.forget_copies([names["visitor-a"]])
    assert not (tmp_path / "visitor-a").exists() and (tmp_path / "visitor-b" / names["visitor-b"]).exists()
    assert trace_files.offered_name("trace-a b/../c", "x").startswith("trace-a_b_.._c-20261205-120000-")
