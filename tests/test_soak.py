"""The soak test (``python -m explorer soak``): a small real run against the served app, and its bounds."""

import json

import pytest

from explorer import cli
from explorer.errors import ExplorerError
from explorer.tools import soak


def test_small_soak_run_completes_identically_and_writes_the_report(tmp_path, capsys):
    out = tmp_path / "soak.json"
    rc = cli.main(["soak", "--model", "tiny-random:1", "--clients", "2", "--runs", "3", "--max-new-tokens", "12",
                   "--cancel-every", "3", "--out", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    report = json.loads(out.read_text())
    for key in ("config", "wall_s", "completion", "correctness", "latency_s", "per_method", "rss_mb", "concurrency",
                "jobs", "skipped"):
        assert key in report
    c = report["completion"]
    assert c["planned"] == c["submitted"] == 6 and not c["errors"]
    assert c["cancel_requested"] == 2  # jobs 3 and 6
    assert c["finished"] + c["cancelled"] == 6 and c["finished"] >= 4
    assert report["correctness"]["identical"] == report["correctness"]["checked"] == c["finished"]
    assert report["latency_s"]["p50"] > 0 and report["latency_s"]["p95"] >= report["latency_s"]["p50"]
    rss = report["rss_mb"]
    assert rss["series"] and 0 < rss["start"] <= rss["peak"] and rss["end"] <= rss["peak"]
    assert report["concurrency"]["limit"] >= 1 and report["concurrency"]["running_at_end"] == 0
    assert {"eesd", "eagle"} <= set(report["skipped"])  # no trained draft ships for a tiny model: left out, said so
    assert {j["method"] for j in report["jobs"]} <= {"ar", "speculative prompt-lookup:3", "speculative early-exit:1",
                                                    "bita", "bild early-exit:1"}
    assert "correctness: " in printed and "RSS:" in printed and "p95" in printed


@pytest.mark.parametrize("argv, words", [
    (["--host", "0.0.0.0"], "loopback only"),
    (["--host", "192.168.1.5"], "loopback only"),
    (["--host", "example.com"], "loopback only"),
    (["--clients", "33"], "--clients must be from 1 to 32"),
    (["--clients", "0"], "--clients must be from 1 to 32"),
    (["--clients", "20", "--runs", "101"], "at most 2000"),
    (["--max-new-tokens", "0"], "--max-new-tokens"),
    (["--cancel-every", "-1"], "--cancel-every"),
])
def test_refuses_non_loopback_hosts_and_unbounded_loads_in_one_line(argv, words, capsys):
    assert cli.main(["soak", "--model", "tiny-random:1", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err


def test_loopback_hosts_are_accepted():
    assert soak.check_host("localhost") == "127.0.0.1"
    assert soak.check_host("127.0.0.2") == "127.0.0.2"
    assert soak.check_host("::1") == "::1"
    with pytest.raises(ExplorerError):
        soak.check_host("::")
    with pytest.raises(ExplorerError):
        soak.run(clients=1, runs=1, host="10.0.0.1")  # refused before anything loads


def test_percentile_is_nearest_rank():
    assert soak.percentile([], 50) is None
    assert soak.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert soak.percentile([float(i) for i in range(1, 101)], 95) == 95.0


def test_the_adversarial_soak_cancels_uploads_and_reads_the_worst_traces(monkeypatch, capsys, tmp_path):
    """Issue 28's probe as a run: every cancelled job idles the server within 2 s, the upload folder ends
    within its budget, the worst legal traces read and draw (one pass, a few uploads, here); and issue 40's: the
    oversized lookahead trace is refused, What if's ReDoS input answers in milliseconds, and a second MCP caller
    drafts nothing from the first's output while an API client does from its own; and issue 51's two-tab audit."""
    import json

    from explorer.cli import main
    from explorer.tools import soak_adversarial, soak_long_jobs
    from explorer.ui import disk, long_jobs

    monkeypatch.setattr(disk, "EVERY_S", 1.0)  # the trimmer's period: the soak waits two of them after the uploads
    monkeypatch.setattr(soak_adversarial, "PASSES", 1)
    monkeypatch.setattr(soak_adversarial, "UPLOADS", 2)
    monkeypatch.setattr(soak_long_jobs, "PROBE_S", 12.0)
    monkeypatch.setattr(long_jobs, "MAX_JOB_SECONDS", 6)
    out = tmp_path / "adversarial.json"
    assert main(["soak", "--adversarial", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert all(row["running_when_cancelled"] and row["idle_after_s"] <= 2 for row in report["cancels"])
    uploads = report["uploads"]
    assert uploads["accepted"] == 2 and uploads["folder_mb_after_trim"] <= uploads["budget_mb"]
    assert len(report["worst_traces"]) == 3
    assert all(row["view_mb"] < 2 for row in report["worst_traces"])
    assert all(row["refused"] and row["seconds"] < 5 for row in report["refused_traces"])  # issue 40's probes
    assert all(row["cpu_s"] < 1 and row["answer"] != "read" for row in report["redos"])
    private = report["mcp_privacy"]
    assert private["same_output"] and private["control_api_client_history_rounds"] > 0
    assert private["second_caller_history_rounds"] == private["second_caller_rounds_showing_the_firsts_text"] == 0
    # issue 51's: two tabs' 2 000-run audits (here priced against a 6 s bound, so the first is cut): another client's
    # one-token decodes answer within 5 s throughout, the second tab waits in line, and the server idles once both close
    audits = report["two_tab_audit"]
    assert audits["all_within"] and audits["slowest_s"] <= 5 and audits["one_token_decodes"] >= 4, audits
    assert audits["second_tab_said"][0].startswith("Waiting: your other long job runs first"), audits
    assert any("cut to" in line.lower() for line in audits["first_tab_said"]), audits
    assert audits["idle_after_close_s"] is not None
    assert "adversarial soak" in capsys.readouterr().out
