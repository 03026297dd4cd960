"""``python -m explorer sweep``: a method's sweep (each method's record declares its own, ``Method.sweeps``: BiLD's
and lenience's thresholds, beam search against Hugging Face's), or the theory lab. The flags come from the records'
axes and settings."""

from __future__ import annotations

import json

from ..errors import ExplorerError


# what `python -m explorer --help` lists, without importing what the command needs
HELP = ("sweep a lossy method's thresholds (quality against cost), the theory lab (measured against Theorem 3.8), or "
        "beam search against Hugging Face's (004's Table 3)")


def add_parser(sub) -> None:
    from .. import methods
    from ..sweep import THEORY_AXES

    sweeps = methods.sweeps()  # every method's sweep (Method.sweeps), and the theory lab
    sweep = sub.add_parser("sweep", help=HELP)
    sweep.add_argument("what", choices=[*sweeps, "theory"],
                       help="; ".join(f"{name}: {plan.help}" for name, (_, plan) in sweeps.items())
                       + "; theory: the theory lab")
    sweep.add_argument("--model", default="default")
    sweep.add_argument("--draft", default="early-exit:4", help="the draft (bild: its small model)")
    for axis in [axis for _, plan in sweeps.values() for axis in plan.axes] + list(THEORY_AXES):
        sweep.add_argument(f"--{axis.flag}", default=",".join(f"{v:g}" for v in axis.default), help=axis.help)
    for setting in [setting for _, plan in sweeps.values() for setting in plan.settings]:
        sweep.add_argument(f"--{setting.name.replace('_', '-')}", type=setting.kind, default=setting.default,
                           help=setting.help)
    sweep.add_argument("--max-new-tokens", type=int, default=48)
    sweep.add_argument("--prompts", type=int,
                       help="use only the first N prompts of the shipped set (theory: 6 unless given)")
    sweep.add_argument("--out", default="sweep.json", help="JSON report (default sweep.json)")
    sweep.set_defaults(handler=handle)


def handle(args) -> int:
    from .. import methods, sweep
    from ..bench import load_prompts

    def floats(text, flag):
        try:
            values = tuple(float(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise ExplorerError(f"{flag} must be comma-separated numbers, e.g. 0.2,0.5") from None
        if not values:
            raise ExplorerError(f"{flag} needs at least one value")
        return values

    def axis_values(axes):
        return {a.name: a.check(floats(getattr(args, a.flag), f"--{a.flag}"), f"--{a.flag}") for a in axes}

    prompts = None
    if args.prompts is not None:
        if args.prompts < 1:
            raise ExplorerError("--prompts must be at least 1")
        prompts = [p["text"] for p in load_prompts()[: args.prompts]]
    if args.what == "theory":
        axes = axis_values(sweep.THEORY_AXES)
        report = sweep.theory_sweep(args.model, *sweep.lab_grid(axes["alphas"], axes["gammas"], axes["costs"]),
                                    args.max_new_tokens, prompts)
        table = sweep.theory_markdown(report)
    else:
        _, plan = methods.sweeps()[args.what]
        report = sweep.run(args.what, args.model, args.draft, axis_values(plan.axes),
                           {s.name: getattr(args, s.name) for s in plan.settings}, args.max_new_tokens, prompts)
        table = plan.table(report)
    try:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2)
    except OSError as err:
        raise ExplorerError(f"cannot write the report: {err}") from None
    print(table)
    return 0
