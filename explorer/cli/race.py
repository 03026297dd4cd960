"""``python -m explorer race``: plain decoding against up to three systems on one prompt (the page's race)."""

from __future__ import annotations

from ..errors import ExplorerError
from .common import add_dtype, write_report


# what `python -m explorer --help` lists, without importing what the command needs
HELP = ("plain decoding against up to three systems on one prompt, lanes taking turns by their own clocks; prints the "
        "speed-ups (the page's race)")


def add_parser(sub) -> None:
    from ..race import DEFAULT_LANES

    racing = sub.add_parser("race", help=HELP)
    racing.add_argument("--prompt", help="the prompt (or --shipped: one shipped prompt per category)")
    racing.add_argument("--shipped", action="store_true", help="race one shipped prompt of each category")
    racing.add_argument("--lane", action="append", dest="lanes", metavar="SYSTEM",
                        help="a system as bench names it, or bild:<draft> (repeatable, at most 3; default: "
                             f"{', '.join(DEFAULT_LANES)})")
    racing.add_argument("--model", default="default")
    add_dtype(racing)
    racing.add_argument("--max-new-tokens", type=int, default=64)
    racing.add_argument("--temperature", type=float, default=0.0)
    racing.add_argument("--out", help="write the (last) race's report as JSON, for the page's Compare view")
    racing.set_defaults(handler=handle)


def handle(args) -> int:
    """Race each prompt; print each race's × plain decoding per lane (and the medians over prompts)."""
    import statistics

    from .. import bench, race
    from ..reports import row_doubt

    if (args.prompt is None) == (not args.shipped):
        raise ExplorerError("give exactly one of --prompt TEXT or --shipped")
    lanes = args.lanes or list(DEFAULT_LANES)
    race.parse_lanes(lanes)  # refused before any model loads
    if args.shipped:
        seen, prompts = set(), []
        for p in bench.load_prompts():
            if p["category"] not in seen:
                seen.add(p["category"])
                prompts.append((p["category"], p["text"]))
    else:
        prompts = [("prompt", args.prompt)]
    ratios: dict[str, list[float]] = {}
    report = None
    for name, text in prompts:
        raced = race.run(race.start(args.model, text, lanes, temperature=args.temperature,
                                    max_new_tokens=args.max_new_tokens, dtype=args.dtype))
        report = race.race_report(raced)
        cells = []
        for row in report["rows"][1:]:
            same = {True: ", identical", False: ", differs", None: ""}[row["identical_to_ar"]]
            if row.get("agreement_with_ar") is not None:
                same += f" ({row['agreement_with_ar']:.0%} of plain decoding's tokens kept)"
            doubt = row_doubt(row, report["rows"][0])  # the rule of every ratio of times (explorer.ratios)
            if doubt is not None:
                cells.append(f"{row['system']} × withheld ({doubt}){same}")
                continue
            ratios.setdefault(row["system"], []).append(row["speedup_vs_ar"])
            cells.append(f"{row['system']} ×{row['speedup_vs_ar']:.2f}{same}")
        print(f"{name}: ar {report['rows'][0]['tokens_per_s']:.1f} tok/s · " + " · ".join(cells), flush=True)
        keeping = _keeping(raced)
        if keeping:
            print(f"  {keeping}", flush=True)
    if len(prompts) > 1:
        print("median × plain decoding (of the races whose ratio stands): "
              + " · ".join(f"{k} ×{statistics.median(v):.2f}" for k, v in ratios.items()))
    if args.out:
        write_report(report, args.out)
    return 0


def _keeping(lanes) -> str | None:
    """The page's "what keeping the text costs", where the race ran the 4-bit copy both drafting and alone."""
    from ..viz.keeping import Keeping, keeping_words

    traces = {lane.system.name: lane.decoding.trace() for lane in lanes}
    if "quantized" not in traces or "quantized:alone" not in traces:
        return None
    return keeping_words(Keeping(traces["quantized"], traces["quantized:alone"], lanes[0].decoding.trace()))
