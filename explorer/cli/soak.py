"""``python -m explorer soak``: the bounded load test of the served app (``explorer.tools.soak``, ``--adversarial``:
``explorer.tools.soak_adversarial``)."""

from __future__ import annotations

import sys

from .common import write_report


# what `python -m explorer --help` lists, without importing what the command needs
HELP = "load-test the app's /decode API in-process on loopback (bounded)"


def add_parser(sub) -> None:
    from ..tools.soak import MAX_CLIENTS, MAX_TOTAL_RUNS

    soak = sub.add_parser("soak", help=HELP,
                          description="Serves the app on a loopback port in this process and drives its /decode "
                                      "API with concurrent gradio clients: completion, identical outputs against "
                                      "one-at-a-time reference decodes, RSS, latency, concurrency.")
    soak.add_argument("--clients", type=int, default=8, help=f"concurrent clients (at most {MAX_CLIENTS})")
    soak.add_argument("--runs", type=int, default=50, help=f"decodes per client (clients × runs at most {MAX_TOTAL_RUNS})")
    soak.add_argument("--max-new-tokens", type=int, default=16)
    soak.add_argument("--model", default="default", help="default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]]")
    soak.add_argument("--cancel-every", type=int, default=0, metavar="K",
                      help="cancel every K-th submission shortly after submitting it (0: never)")
    soak.add_argument("--seed", type=int, default=0)
    soak.add_argument("--host", default="127.0.0.1", help="loopback address to serve on (nothing else is accepted)")
    soak.add_argument("--out", help="also write the full report (every job, the RSS series) as JSON to this file")
    soak.add_argument("--adversarial", action="store_true",
                      help="instead: cancel long decodes (beam, speculative, ar) while they compute, upload files at "
                           "the size cap past the disk budget, read and draw the worst legal traces, refuse an "
                           "oversized one, time What if's worst log line and check that two MCP callers never see "
                           "each other's text; reports CPU idle time after each cancel, disk and RSS (default model "
                           "here: tiny-random:1:16)")
    soak.set_defaults(handler=handle)


def handle(args) -> int:
    from ..tools import soak

    soak.check_host(args.host)  # refuse bad arguments before loading anything
    if args.adversarial:
        from ..tools import soak_adversarial

        model = "tiny-random:1:16" if args.model == "default" else args.model
        report = soak_adversarial.run(model=model, host=args.host,
                                      progress=lambda line: print(line, file=sys.stderr, flush=True))
        if args.out:
            write_report(report, args.out)
        print(soak_adversarial.summary(report))
        bad = [row for row in report["cancels"] if row["idle_after_s"] is None or row["idle_after_s"] > 2
               or row["most_computing"] > row["slots"]]
        bad += [row for row in report["refused_traces"] if not row["refused"]]
        bad += [row for row in report["redos"] if row["cpu_s"] > 1]
        private = report["mcp_privacy"]
        bad += [private] if private.get("second_caller_history_rounds") or private.get(
            "second_caller_rounds_showing_the_firsts_text") else []
        long_jobs = report["two_tab_audit"]  # issue 51: another client's one token within 5 s throughout
        bad += [long_jobs] if not long_jobs["all_within"] or long_jobs["idle_after_close_s"] is None else []
        return 1 if bad or report["uploads"]["folder_mb_after_trim"] > report["uploads"]["budget_mb"] else 0
    soak.check_args(args.clients, args.runs, args.max_new_tokens, args.cancel_every, args.seed)
    report = soak.run(clients=args.clients, runs=args.runs, max_new_tokens=args.max_new_tokens, model=args.model,
                      cancel_every=args.cancel_every, seed=args.seed, host=args.host,
                      progress=lambda line: print(line, file=sys.stderr, flush=True))
    if args.out:
        write_report(report, args.out)
    print(soak.summary(report))
    c = report["completion"]
    return 0 if (report["correctness"]["identical"] == report["correctness"]["checked"]
                 and not c["errors"] and c["finished"] + c["cancelled"] == c["submitted"]) else 1
