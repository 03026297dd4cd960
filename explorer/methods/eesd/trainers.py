"""EESD's offline trainers as ``python -m explorer train`` sub-commands: the exit layer after the first N
layers (``train_exit``, sections 3.1–3.2) and calibrated TS's θ_M predictor (``train_theta``, eq. 5).
Their heavy imports wait until one runs, so the command line starts quickly."""

from __future__ import annotations

from ...errors import ExplorerError
from .. import Trainer, answer_flags


def _exit_arguments(parser) -> None:
    from .exits import ARTIFACT_DIR

    parser.add_argument("--model", default="default", help="the target: default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]]")
    parser.add_argument("--layers", type=int, action="append", required=True, metavar="N",
                    help="exit after the first N layers (repeatable: --layers 4 --layers 8)")
    parser.add_argument("--tokens", type=int, default=60_000, help="answer tokens of self-generated training data")
    parser.add_argument("--exit-layers", type=int, default=1, help="decoder layers of the exit itself (EESD: 1)")
    parser.add_argument("--steps", type=int, default=600, help="optimizer steps (AdamW)")
    parser.add_argument("--seed", type=int, default=0, help="training seed (the data's seed is fixed)")
    parser.add_argument("--vocab", type=int, default=0, metavar="V",
                    help="score only the V most frequent tokens (+ EOS): a cheaper draft step (0: all)")
    parser.add_argument("--loss", choices=["kl", "ce"], default="kl",
                    help="kl: KL(target || exit) over the target's top-64; ce: cross-entropy to its tokens")
    parser.add_argument("--mode", choices=["hybrid", "greedy+sample", "greedy", "sample"], default="hybrid",
                    help="how the target answers the bank (hybrid: greedy for some prompts, sampled for others; "
                         "greedy+sample: a greedy pass, then sampled passes)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch", type=int, default=2, help="windows per step")
    parser.add_argument("--window", type=int, default=512, help="tokens per packed window")
    answer_flags(parser)
    parser.add_argument("--out", default=str(ARTIFACT_DIR), help=f"artifact folder (default {ARTIFACT_DIR})")


def _train_exit(args, argv: list[str]) -> int:
    import shlex
    from pathlib import Path

    from ...models import load
    from ...train.data import load_prompt_bank
    from .train_exit import TrainConfig, train_early_exit, write_artifact

    if args.vocab < 0:
        raise ExplorerError("--vocab must be 0 (the whole vocabulary) or a positive count")
    layers = tuple(dict.fromkeys(args.layers))
    configs = [TrainConfig(n, tokens=args.tokens, exit_layers=args.exit_layers, steps=args.steps, seed=args.seed,
                           vocab=args.vocab or None,
                           loss=args.loss, mode=args.mode, lr=args.lr, batch=args.batch, window=args.window,
                           max_new_tokens=args.max_new_tokens) for n in layers]
    target = load(args.model, device=args.device, dtype=args.dtype)
    prompts = load_prompt_bank(path=Path(args.prompts)) if args.prompts else None
    command = "python -m explorer " + shlex.join(argv)
    for config in configs:
        result = train_early_exit(target, config, prompts, precompute_layers=layers)
        path = write_artifact(target, config, result, Path(args.out), command)
        print(f"N={config.n_layers}: held-out agreement {result.heldout_agreement:.1%} "
              f"(untrained {result.untrained_agreement:.1%}, {result.heldout_tokens} tokens) · "
              f"{config.steps} steps in {result.train_seconds:.0f} s · {path}")
    return 0


def _theta_arguments(parser) -> None:
    from .exits import ARTIFACT_DIR

    parser.add_argument("--model", default="default", help="the target: default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]]")
    parser.add_argument("--layers", type=int, action="append", required=True, metavar="N",
                       help="the trained exit after N layers (repeatable)")
    parser.add_argument("--samples", type=int, default=48, help="train prompts (every 4th of the bank's train split) "
                                                              "answered afresh by sampling")
    parser.add_argument("--steps", type=int, default=400, help="full-batch AdamW steps")
    parser.add_argument("--seed", type=int, default=0)
    answer_flags(parser)
    parser.add_argument("--exits", help=f"where the exits are, and where θ_M is written (default {ARTIFACT_DIR})")


def _train_theta(args, argv: list[str]) -> int:
    import shlex
    from pathlib import Path

    from .exits import ARTIFACT_DIR, find_exit, load_exit, untrained_exit
    from ...models import load
    from ...train.data import load_prompt_bank
    from .train_theta import train_theta

    target = load(args.model, device=args.device, dtype=args.dtype)
    folder = Path(args.exits) if args.exits else ARTIFACT_DIR
    heads = []
    for n in dict.fromkeys(args.layers):
        path = find_exit(target.model, n, folder)
        heads.append(load_exit(target.model, path) if path is not None else untrained_exit(target.model, n))
    prompts = load_prompt_bank(path=Path(args.prompts)) if args.prompts else load_prompt_bank()
    results = train_theta(target, heads, prompts, samples=args.samples, steps=args.steps, seed=args.seed,
                          max_new_tokens=args.max_new_tokens, out=folder,
                          command="python -m explorer " + shlex.join(argv))
    for n, (path, manifest) in results.items():
        h = manifest["heldout"]
        print(f"N={n}: θ_M held-out log-loss {h['log_loss']} (constant {h['log_loss_constant']}) · Brier {h['brier']} "
              f"(constant {h['brier_constant']}) · AUC {h['auc']} on {h['examples']} draft steps · {path}")
    return 0


EXIT_TRAINER = Trainer("early-exit", help="EESD exit layer after the first N layers (sections 3.1-3.2)",
    description="Self-distils one exit layer on top of the target's first N layers (EESD 3.1-3.2): the "
                "target answers the prompt bank (assets/train_prompts.json), then the layer learns the "
                "target's next-token distributions. Data and features are cached; training resumes.",
    add_arguments=_exit_arguments, run=_train_exit)
THETA_TRAINER = Trainer("theta", help="cali-ts's θ_M predictor for a trained exit (EESD eq. 5)",
    description="Fits calibrated TS's acceptance predictor θ_M (EESD eq. 5, diagonal W^i) for each shipped "
                "exit N on the target's greedy answers to the prompt bank, and measures it on the held-out "
                "prompts against a constant. Written beside the exit; cali-ts uses it automatically.",
    add_arguments=_theta_arguments, run=_train_theta)
