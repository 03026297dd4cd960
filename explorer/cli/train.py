"""``python -m explorer train TRAINER``: the offline trainers, one sub-command each (their handlers take the
command line too: it is written into each artifact's manifest)."""

from __future__ import annotations


# what `python -m explorer --help` lists, without importing what the command needs
HELP = "train a draft offline on the target's own answers (self-distillation)"


def add_parser(sub) -> None:
    from .common import Parser

    train = sub.add_parser("train", help=HELP,
                           description="Offline trainers. Each writes an artifact (weights + JSON manifest) that "
                                       "the decoding methods find by the target model's fingerprint.")
    _add_trainers(train.add_subparsers(dest="trainer", required=True, parser_class=Parser, metavar="TRAINER"))


def _add_trainers(trainers) -> None:
    """One sub-command per trainer: each method's (its record's ``trainers``), then the data generator
    they all read."""
    from .. import methods

    for trainer in methods.trainers():
        parser = trainers.add_parser(trainer.name, help=trainer.help, description=trainer.description)
        trainer.add_arguments(parser)
        parser.set_defaults(handler=trainer.run)

    from ..train.data import SHIPPED

    data = trainers.add_parser(
        "data", help="generate the self-distillation answers and write them to assets/selfgen/",
        description="The target answers the prompt bank (a greedy pass, then sampled passes until --tokens, and "
                    "the held-out prompts greedily) on the fast path, cached and resumable; the answers are "
                    "written as compressed archives (about 2 bytes a token) that the trainers read on any machine "
                    "instead of generating.")
    data.add_argument("--model", default="default", help="the target: default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]]")
    data.add_argument("--tokens", type=int, default=1_500_000, help="answer tokens of training data")
    data.add_argument("--mode", choices=["greedy+sample", "hybrid", "greedy", "sample"], default="greedy+sample")
    data.add_argument("--max-new-tokens", type=int, default=256, help="length cap of the target's answers")
    data.add_argument("--prompts", help="a prompt bank JSON file like assets/train_prompts.json (default: that file)")
    data.add_argument("--device", help="cpu | cuda (default: cuda when present)")
    data.add_argument("--out", default=str(SHIPPED), help=f"archive folder (default {SHIPPED})")
    data.set_defaults(handler=handle_data)


def handle_data(args, argv: list[str]) -> int:
    import time
    from pathlib import Path

    from ..models import load
    from ..train.data import export_corpus, load_prompt_bank

    target = load(args.model, device=args.device)
    prompts = load_prompt_bank(path=Path(args.prompts)) if args.prompts else load_prompt_bank()
    start = time.perf_counter()
    written = export_corpus(target, prompts, args.tokens, args.mode, args.max_new_tokens, folder=Path(args.out))
    for path in written:
        print(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
    print(f"{len(written)} archives in {time.perf_counter() - start:.0f} s")
    return 0
