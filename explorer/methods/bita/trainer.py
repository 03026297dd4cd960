"""BiTA's trainer as ``python -m explorer train bita`` (``train``: the training itself); heavy imports
wait until it runs."""

from __future__ import annotations

from .. import Trainer, answer_flags


def _arguments(parser) -> None:
    from .tokens import ARTIFACT_DIR as BITA_DIR

    parser.add_argument("--model", default="default", help="the target: default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]]")
    parser.add_argument("--prompt-tokens", type=int, default=16, help="P deep prompt tokens (0: mask tokens only)")
    parser.add_argument("--masks", type=int, default=3, help="M mask tokens")
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps (AdamW)")
    parser.add_argument("--batch", type=int, default=4, help="answers per step")
    parser.add_argument("--groups", type=int, default=16, help="split points (mask groups) per answer and step")
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    answer_flags(parser)
    parser.add_argument("--out", help=f"artifact file (default {BITA_DIR}/<model fingerprint>.safetensors)")


def _train(args, argv: list[str]) -> int:
    import shlex
    from pathlib import Path

    from .tokens import ARTIFACT_DIR as BITA_DIR
    from ...artifacts import fingerprint
    from ...models import load
    from .train import BitaTrainConfig, train_bita, write_artifact
    from ...train.data import load_prompt_bank

    config = BitaTrainConfig(prompt_tokens=args.prompt_tokens, mask_tokens=args.masks, steps=args.steps,
                             batch=args.batch, groups=args.groups, lr=args.lr, seed=args.seed,
                             max_new_tokens=args.max_new_tokens)
    target = load(args.model, device=args.device, dtype=args.dtype)
    prompts = load_prompt_bank(path=Path(args.prompts)) if args.prompts else None
    result = train_bita(target, config, prompts)
    path = Path(args.out) if args.out else BITA_DIR / f"{fingerprint(target.model)}.safetensors"
    path = write_artifact(target, config, result, path, "python -m explorer " + shlex.join(argv))
    trained, untrained = result.heldout["trained"], result.heldout["untrained"]
    print(f"held-out top-1 per mask {trained['top1']} (untrained {untrained['top1']}) · efficient-tree tokens per "
          f"forward {trained['tokens_per_forward']['efficient']:.2f} (untrained "
          f"{untrained['tokens_per_forward']['efficient']:.2f}) · {config.steps} steps in {result.train_seconds:.0f} s "
          f"· {path}")
    return 0


BITA_TRAINER = Trainer("bita", help="BiTA prompt and mask tokens on the frozen target (section 3.1)",
    description="Bi-directional tuning (BiTA 3.1): learns deep prompt tokens and mask tokens on the frozen "
                "target from its own greedy answers to the prompt bank (assets/train_prompts.json), with the "
                "SAR loss of eq. 1 at random split points. Seeded; resumes from its checkpoint.",
    add_arguments=_arguments, run=_train)
