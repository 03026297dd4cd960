"""``python -m explorer bench``: Hugging Face's generate and this explorer's methods side by side."""

from __future__ import annotations

import json

from ..errors import ExplorerError
from .common import add_dtype


# what `python -m explorer --help` lists, without importing what the command needs
HELP = "benchmark HF generate and our methods side by side"


def add_parser(sub) -> None:
    from ..bench import DEFAULT_SYSTEMS, system_grammar
    from ..drafts import draft_forms
    from ..engine.controllers import CONTROLLERS, DEFAULT_CONTROLLER, DEFAULT_GAMMA

    bench = sub.add_parser("bench", help=HELP)
    bench.add_argument("--model", help="default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]] (default: default)")
    bench.add_argument("--pair", help="a target and its drafts: smollm2-1.7b | tiny; sets --model and, where no "
                       "--system is given, the systems (hf-generate, ar and speculative with each of its drafts)")
    bench.add_argument("--system", action="append", dest="systems", metavar="NAME",
                       help=(f"{system_grammar()}; <draft> is {draft_forms()} (repeatable; default: "
                             f"{' '.join(DEFAULT_SYSTEMS)})").replace("%", "%%"))
    bench.add_argument("--repeats", type=int, default=3, help="runs of every system on every prompt, in a rotating "
                       "order; tokens/s is their median, with min and max (default 3)")
    bench.add_argument("--max-new-tokens", type=int, default=64, help="tokens each run generates (default 64)")
    bench.add_argument("--temperature", type=float, default=0.0, help="0 = greedy, where every lossless system must "
                       "match plain decoding token for token; above 0, sampling (default 0)")
    bench.add_argument("--gamma", type=int, default=DEFAULT_GAMMA, help="tokens drafted per round for systems that do "
                       f"not name their own with @γ (default {DEFAULT_GAMMA})")
    bench.add_argument("--controller", default=DEFAULT_CONTROLLER, choices=list(CONTROLLERS),
                       help=f"how γ changes between rounds, for systems that do not name one (default {DEFAULT_CONTROLLER})")
    bench.add_argument("--device", help="cpu | cuda (default: cuda when present)")
    add_dtype(bench)
    bench.add_argument("--prompts", choices=("shipped", "heldout"), default="shipped",
                       help="shipped: the 10 prompts the page offers (assets/prompts.json); heldout: 10 of the prompt "
                            "bank's held-out prompts, one per kind (nothing was trained or tuned on them)")
    bench.add_argument("--quick", action="store_true", help="one prompt per category, 24 tokens, 1 repeat: the shortest "
                       "run that checks every system (every run's line gives the time left, from this machine's pace)")
    bench.add_argument("--out", default="bench.json", help="JSON report (default bench.json)")
    bench.add_argument("--markdown", help="also write the markdown table to this file")
    bench.set_defaults(handler=handle)


def handle(args) -> int:
    from .. import bench

    if args.repeats < 1 or args.max_new_tokens < 1:
        raise ExplorerError("--repeats and --max-new-tokens must be at least 1")
    systems = tuple(args.systems or bench.DEFAULT_SYSTEMS)
    if args.pair is not None:
        from ..pairs import get_pair

        if args.model is not None:
            raise ExplorerError("give --pair or --model, not both (a pair names its target model)")
        pair = get_pair(args.pair)
        args.model = pair.target
        systems = tuple(args.systems or ("hf-generate", "ar", *(f"speculative:{d}" for d in pair.drafts)))
    report = bench.run(args.model or "default", systems, repeats=args.repeats,
                       max_new_tokens=args.max_new_tokens, temperature=args.temperature, gamma=args.gamma,
                       controller=args.controller, quick=args.quick, device=args.device, dtype=args.dtype,
                       prompts=bench.heldout_prompts() if args.prompts == "heldout" else None)
    report["meta"]["prompt_set"] = args.prompts
    table = bench.markdown(report)
    try:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2)
        if args.markdown:
            with open(args.markdown, "w", encoding="utf-8") as fh:
                fh.write(table + "\n")
    except OSError as err:
        raise ExplorerError(f"cannot write the report: {err}") from None
    print(table)
    return 0
