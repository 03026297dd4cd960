"""``python -m explorer whatif``: acceptance by draft position and the best γ from a serving engine's metrics."""

from __future__ import annotations

import json
import os
import sys

from ..errors import ExplorerError
from ..limits import clip


# what `python -m explorer --help` lists, without importing what the command needs
HELP = "acceptance by draft position and the best γ from vLLM, SGLang or llama.cpp metrics"


def add_parser(sub) -> None:
    from ..whatif import DEFAULT_DRAFT_COST

    whatif = sub.add_parser(
        "whatif", help=HELP,
        description="Reads a serving engine's speculative-decoding counters (a vLLM /metrics page, vLLM or SGLang "
                    "log lines, llama.cpp timings JSON; also this explorer's traces and bench reports) and prints "
                    "acceptance by draft position, the i.i.d. α with the same mean acceptance length, and the best γ: "
                    "E(γ) = 1 + a_1 + … + a_γ over γ·c + T(γ+1)/T(1).")
    whatif.add_argument("--metrics", action="append", required=True, metavar="FILE",
                        help="the file ('-': standard input); repeatable, every drafter goes on one chart")
    whatif.add_argument("--draft-cost", type=float, metavar="C",
                        help="c: a draft token's time over a target forward's (default: a source's own measured c, "
                             f"else {DEFAULT_DRAFT_COST}; 0 for n-gram drafting)")
    whatif.add_argument("--verify-cost", metavar="R1,R2,…",
                        help="T(n)/T(1) for n = 1, 2, … (default flat 1, as on a GPU with room to spare), or "
                             "'measure' to time this machine's --model")
    whatif.add_argument("--gamma", type=int, help="the draft length a source without per-position counts ran with "
                                                  "(llama.cpp --draft-max, SGLang --speculative-num-steps, vLLM v0)")
    whatif.add_argument("--model", default="default", help="--verify-cost measure: whose T(n) to time")
    whatif.add_argument("--json", action="store_true", help="print the analysis as JSON instead of words")
    whatif.add_argument("--html", metavar="FILE", help="also write the chart as a standalone HTML page")
    whatif.set_defaults(handler=handle)


def handle(args) -> int:
    """``whatif``: read each file, analyse every drafter in it at one price, print words or JSON."""
    from .. import whatif

    cost = whatif.check_draft_cost(args.draft_cost)
    measure = (args.verify_cost or "").strip().lower() == "measure"
    curve = None if measure else whatif.parse_verify_cost(args.verify_cost)
    drafters = []
    for path in args.metrics:
        drafters += whatif.read(_read_metrics(path), gamma=args.gamma)
    if len(drafters) > whatif.MAX_DRAFTERS:
        raise ExplorerError(f"{len(drafters)} drafters in these files; at most {whatif.MAX_DRAFTERS} are compared")
    measured_on = None
    if measure:
        curve, measured_on = whatif.measure_verify_cost(
            args.model, max(d.positions for d in drafters), progress=lambda line: print(line, file=sys.stderr, flush=True))
    report = whatif.analyse_all(drafters, cost, curve) | {"verify_cost_measured_on": measured_on}
    if args.html:
        from ..viz.whatif import whatif_figure

        try:
            whatif_figure(report["drafters"]).write_html(args.html, include_plotlyjs=True)
        except OSError as err:
            raise ExplorerError(f"cannot write the chart to {args.html!r}: {err.strerror}") from None
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for n, result in enumerate(report["drafters"]):
        print(("\n" if n else "") + whatif_text(result))
    if measured_on:
        print(f"\nT(n)/T(1) measured with {measured_on}.")
    return 0


def _read_metrics(path: str) -> str | bytes:
    """A metrics file's bytes ('-': standard input), refused past the size bound before it is read whole."""
    from ..whatif import MAX_METRICS_BYTES

    if path == "-":
        data = sys.stdin.buffer.read(MAX_METRICS_BYTES + 1)
        return data
    try:
        if os.path.getsize(path) > MAX_METRICS_BYTES:
            return b" " * (MAX_METRICS_BYTES + 1)  # refused by the reader with the same line as any too-big text
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as err:
        raise ExplorerError(f"cannot read {clip(path, 80)}: {err.strerror or 'not a readable file'}") from None


def whatif_text(result: dict) -> str:
    """One drafter's analysis as a terminal table and its plain words."""
    from ..whatif import explain

    lines = [f"{result['name']}  ({result['source']})",
             "position   accepted   given earlier accepted   i.i.d. α^i"]
    for i, (a, r, f) in enumerate(zip(result["acceptance_by_position"], result["conditional_by_position"],
                                      result["iid_acceptance_by_position"]), 1):
        lines.append(f"{i:>8}   {a:>8.1%}   {'–' if r is None else format(r, '.1%'):>22}   {f:>10.1%}")
    lines.append("       γ   tokens/forward   T(γ+1)/T(1)   speed-up   i.i.d. speed-up")
    for g, (e, v, s, t) in enumerate(zip(result["expected_tokens_by_gamma"], result["verify_cost"],
                                         result["speedup_by_gamma"], result["iid_speedup_by_gamma"])):
        star = " ← best" if g == result["best_gamma"] else ""
        lines.append(f"{g:>8}   {e:>14.2f}   {v:>11.2f}   {s:>7.2f}×   {t:>14.2f}×{star}")
    return "\n".join(lines) + "\n" + explain(result)
