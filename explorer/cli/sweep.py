"""``python -m explorer sweep``: BiLD's and lenience's thresholds, the theory lab, beam search against Hugging
Face's."""

from __future__ import annotations

import json

from ..errors import ExplorerError


# what `python -m explorer --help` lists, without importing what the command needs
HELP = ("sweep a lossy method's thresholds (quality against cost), the theory lab (measured against Theorem 3.8), or "
        "beam search against Hugging Face's (004's Table 3)")


def add_parser(sub) -> None:
    sweep = sub.add_parser("sweep", help=HELP)
    sweep.add_argument("what", choices=["bild", "lenience", "theory", "beam"])
    sweep.add_argument("--model", default="default")
    sweep.add_argument("--draft", default="early-exit:4", help="the small model (bild) or the draft (lenience, beam)")
    sweep.add_argument("--width", default="1,3,5", help="beam: beam widths k, comma-separated")
    sweep.add_argument("--lenience", default="1,0.5,0.3,0.1", help="lenience: l values, comma-separated")
    sweep.add_argument("--alpha", default="0.6,0.8,0.9", help="theory: the synthetic draft's α values")
    sweep.add_argument("--gamma", default="1,2,4,8", help="theory: γ values (whole numbers)")
    sweep.add_argument("--cost", default="0,0.2", help="theory: the synthetic draft's c values (× T(1))")
    sweep.add_argument("--temperature", type=float, default=0.0, help="lenience: 0 = greedy")
    sweep.add_argument("--fallback", default="0.2,0.4,0.6,0.8", help="α_FB values, comma-separated")
    sweep.add_argument("--rollback", default="1,2,3,5,inf", help="α_RB values, comma-separated (inf: none)")
    sweep.add_argument("--max-new-tokens", type=int, default=48)
    sweep.add_argument("--max-small-steps", type=int, help="the cap on one small-model turn (default: bild's)")
    sweep.add_argument("--prompts", type=int,
                       help="use only the first N prompts of the shipped set (theory: 6 unless given)")
    sweep.add_argument("--out", default="sweep.json", help="JSON report (default sweep.json)")
    sweep.set_defaults(handler=handle)


def handle(args) -> int:
    from .. import sweep
    from ..bench import load_prompts

    def floats(text, flag):
        try:
            values = tuple(float(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise ExplorerError(f"{flag} must be comma-separated numbers, e.g. 0.2,0.5") from None
        if not values:
            raise ExplorerError(f"{flag} needs at least one value")
        return values

    prompts = None
    if args.prompts is not None:
        if args.prompts < 1:
            raise ExplorerError("--prompts must be at least 1")
        prompts = [p["text"] for p in load_prompts()[: args.prompts]]
    if args.what == "theory":
        report = sweep.theory_sweep(args.model, *sweep.lab_grid(floats(args.alpha, "--alpha"), floats(args.gamma, "--gamma"),
                                                          floats(args.cost, "--cost")), args.max_new_tokens,
                                    prompts)
        table = sweep.theory_markdown(report)
    elif args.what == "beam":
        widths = floats(args.width, "--width")
        if any(w != int(w) or not 1 <= w <= 8 for w in widths):
            raise ExplorerError("--width must be whole numbers from 1 to 8")
        from ..beam_sweep import beam_markdown, beam_sweep

        report = beam_sweep(args.model, args.draft, tuple(int(w) for w in widths), max_new_tokens=args.max_new_tokens,
                            prompts=prompts)
        table = beam_markdown(report)
    elif args.what == "lenience":
        report = sweep.lenience_sweep(args.model, args.draft, floats(args.lenience, "--lenience"), args.max_new_tokens,
                                      args.temperature, prompts)
        table = sweep.lenience_markdown(report)
    else:
        report = sweep.bild_sweep(args.model, args.draft, floats(args.fallback, "--fallback"),
                                  floats(args.rollback, "--rollback"), args.max_new_tokens, args.max_small_steps, prompts)
        table = sweep.markdown(report)
    try:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2)
    except OSError as err:
        raise ExplorerError(f"cannot write the report: {err}") from None
    print(table)
    return 0
