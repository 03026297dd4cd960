"""Item 1 of issue 28: every long job stops soon after nobody waits for it, and no more jobs compute at
once than configured. CPU is read as this process's CPU time (the server runs in it) over a quiet window."""

from __future__ import annotations

import threading
import time

import pytest
from conftest_ui import busy_seconds, served_app

import explorer
from explorer import sweep
from explorer.errors import ExplorerError
from explorer.tools.soak_clients import page_client
from explorer.ui import jobs


@pytest.fixture(scope="module")
def client():
    with served_app() as (_, url):
        yield page_client(url)


def test_beam_search_yields_between_its_steps(tiny_target):
    """The round driver's heartbeat: a beam run gives a consumer a chance to stop after every step."""
    decoding = explorer.stream(tiny_target, prompt_ids=[3, 4, 5], method="beam", draft="model:tiny-random:2:1",
                               beam_width=3, gamma=2, max_new_tokens=40)
    steps = decoding.steps()
    assert next(steps) is None  # one step of the search done, no round yet: a consumer may stop here
    steps.close()
    assert decoding.trace().summary.stop_reason == "stopped" and not decoding.rounds


@pytest.mark.parametrize("method, draft, tokens", [("beam", "model:tiny-random:2:16", 256),
                                                   ("speculative", "model:tiny-random:2:16", 1000)])
def test_a_cancelled_api_job_idles_the_server_within_2_s(client, method, draft, tokens):
    """A cancelled beam search held a core for 15 minutes (it searched to the end before its first yield)."""
    jobs.WORK.most = jobs.WORK.busy
    job = client.submit("abc", method, draft, 2, 0.0, tokens, 0, "tiny-random:1:16", api_name="/decode")
    deadline = time.monotonic() + 60
    while jobs.WORK.busy == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # into the work
    assert not job.done(), "the job ended before it could be cancelled: make it longer"
    job.cancel()
    time.sleep(2.0)
    assert busy_seconds() < 0.3  # idle: the decode stopped at its next step
    assert jobs.WORK.busy == 0 and jobs.WORK.most <= jobs.WORK.slots


def test_jobs_never_compute_more_at_once_than_the_slots(client):
    """Four decodes from four clients under a limit of two: at most two compute at any moment."""
    jobs.WORK.most = jobs.WORK.busy
    submitted = [client.submit("abc", "speculative", "model:tiny-random:2:1", 3, 0.0, 200, seed, "tiny-random:1:4",
                               api_name="/decode") for seed in range(4)]
    for job in submitted:
        job.result(timeout=300)
    assert jobs.WORK.most <= jobs.WORK.slots == jobs.DECODE_CONCURRENCY


def test_sweeps_and_the_audit_stop_when_asked():
    """The theory lab, the BiLD sweep and the sampling audit check their stop signal before every decode."""
    from explorer.audit import sampling_audit

    calls = []

    def stop_after(n):
        return lambda: calls.append(1) or len(calls) > n

    started = time.monotonic()
    with pytest.raises(sweep.Stopped, match="stopped after"):
        sweep.theory_sweep("tiny-random:1", (0.6, 0.9), (1, 2), (0.0,), 16, prompts=["abc"], should_stop=stop_after(2),
                           progress=lambda *a: None)
    calls.clear()
    with pytest.raises(sweep.Stopped):
        sweep.run("bild", "tiny-random:1", "model:tiny-random:2:1",
                  {"fallbacks": (0.5, 0.8), "rollbacks": (float("inf"),)}, max_new_tokens=16, prompts=["abc"], should_stop=stop_after(1), progress=lambda *a: None)
    calls.clear()
    with pytest.raises(ExplorerError, match="stopped after 3"):
        sampling_audit("tiny-random:1", prompt_ids=[3, 4], runs=100, draft="model:tiny-random:2:1",
                       should_stop=stop_after(3))
    assert time.monotonic() - started < 60


def test_a_closed_page_stops_its_jobs():
    """``demo.unload`` closes the session: every job of that page stops at its next check."""
    jobs.close("page-1")
    assert jobs.stopped("page-1") and not jobs.stopped("page-2")
    for k in range(jobs.REMEMBERED_CLOSED + 10):  # bounded memory: the oldest closed ids are forgotten
        jobs.close(f"other-{k}")
    assert not jobs.stopped("page-1") and jobs.stopped(f"other-{jobs.REMEMBERED_CLOSED + 9}")


@pytest.mark.parametrize("call, words", [
    (lambda: explorer.decode("tiny-random:1", prompt_ids=[3], method="beam", draft="model:tiny-random:2:1",
                             beam_width=8, max_new_tokens=1000), "at most 2048"),
    (lambda: sweep.theory_sweep("tiny-random:1", tuple(i / 10 for i in range(1, 9)), tuple(range(1, 9)),
                                tuple(i / 10 for i in range(8)), 96, prompts=["abc"]), "at most 16,384"),
])
def test_work_past_its_bound_is_refused_in_one_line(call, words):
    """Beam width × tokens and the lab's grid × tokens are priced before anything runs."""
    started = time.monotonic()
    with pytest.raises(ExplorerError, match=words) as err:
        call()
    assert "\n" not in str(err.value) and time.monotonic() - started < 5


def test_an_audit_of_a_huge_prompt_is_refused_after_its_first_run():
    from explorer.audit import sampling_audit

    with pytest.raises(ExplorerError, match="prompt tokens"):
        sampling_audit("tiny-random:1", prompt_ids=[3, 4, 5] * 300, runs=2000, draft="model:tiny-random:2:1")


def test_work_slots_count_what_holds_them():
    work = jobs.Work(2)
    inside = threading.Barrier(3)
    release = threading.Event()

    def hold():
        with work.slot():
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=hold) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert work.busy == 2 and work.most == 2
    release.set()
    for t in threads:
        t.join()
    assert work.busy == 0 and work.most == 2
