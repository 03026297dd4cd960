"""EAGLE's feature head trainer as ``python -m explorer train feature-head`` (``train``: the training
itself); heavy imports wait until it runs."""

from __future__ import annotations

from ...errors import ExplorerError
from .. import Trainer, answer_flags


def _arguments(parser) -> None:
    from .head import ARTIFACT_DIR as HEAD_DIR, MAX_LAYERS

    parser.add_argument("--model", default="default", help="the target: default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]]")
    parser.add_argument("--layers", type=int, default=1, help=f"decoder layers in the head (1 to {MAX_LAYERS})")
    parser.add_argument("--vocab", type=int, default=16384, metavar="V",
                    help="score only the V most frequent answer tokens (+ EOS): a cheaper draft step (0: all)")
    parser.add_argument("--tokens", type=int, default=1_500_000, help="answer tokens of self-generated training data")
    parser.add_argument("--steps", type=int, default=3000, help="optimizer steps (AdamW)")
    parser.add_argument("--unroll", type=int, default=3, help="draft steps trained per position (training-time test; "
                                                          "1: the paper's true features only)")
    parser.add_argument("--batch", type=int, default=4, help="windows of 512 tokens per step")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--w-feature", type=float, default=1.0, help="weight of the feature regression (smooth L1)")
    parser.add_argument("--w-token", type=float, default=1.0, help="weight of the KL to the target's top-64")
    parser.add_argument("--token-share", type=float, default=0.25,
                    help="share of positions whose token term is computed each step (the V'-row head is most of "
                         "a step's arithmetic)")
    parser.add_argument("--seed", type=int, default=0, help="training seed (the data's seed is fixed)")
    parser.add_argument("--mode", choices=["greedy+sample", "hybrid", "greedy", "sample"], default="greedy+sample",
                    help="how the target answers the bank (greedy+sample: a greedy pass, then sampled passes)")
    answer_flags(parser)
    parser.add_argument("--precompute", type=int, action="append", default=[], metavar="N",
                    help="also cache the states after layer N in the same frozen pass (for train early-exit)")
    parser.add_argument("--init", metavar="HEAD", help="go on training this head (a .safetensors artifact, or 'shipped': "
                        "the one in the artifact folder) with a fresh optimizer and schedule for --steps more steps; "
                        "--layers, --vocab and the data must be its own (try --lr 5e-4)")
    parser.add_argument("--out", default=str(HEAD_DIR), help=f"artifact folder (default {HEAD_DIR})")


def _train(args, argv: list[str]) -> int:
    import shlex
    from pathlib import Path

    from .train import HeadTrainConfig, head_digest, train_feature_head, write_artifact
    from ...models import load
    from ...train.data import load_prompt_bank

    if args.vocab < 0:
        raise ExplorerError("--vocab must be 0 (the whole vocabulary) or a positive count")
    target = load(args.model, device=args.device, dtype=args.dtype)
    init = digest = None
    if args.init:
        from .head import find_head, load_head

        found = find_head(target.model) if args.init == "shipped" else Path(args.init)
        if found is None or not found.is_file():
            raise ExplorerError(f"--init: no head at {args.init!r} (a .safetensors artifact, or 'shipped')")
        init, digest = load_head(target.model, found), head_digest(found)
    config = HeadTrainConfig(layers=args.layers, vocab=args.vocab or None, tokens=args.tokens, steps=args.steps,
                             unroll=args.unroll, batch=args.batch, lr=args.lr, w_feature=args.w_feature,
                             w_token=args.w_token, token_share=args.token_share, seed=args.seed, mode=args.mode,
                             max_new_tokens=args.max_new_tokens, init=digest or "")
    prompts = load_prompt_bank(path=Path(args.prompts)) if args.prompts else None
    result = train_feature_head(target, config, prompts, precompute_layers=tuple(args.precompute), init=init)
    path = write_artifact(target, config, result, Path(args.out), "python -m explorer " + shlex.join(argv), init)
    accept = " / ".join(f"{a:.1%}" for a in result.heldout_acceptance)
    untrained = " / ".join(f"{a:.1%}" for a in result.untrained_acceptance)
    start = "before this run" if init is not None else "untrained"
    print(f"held-out greedy acceptance by draft position {accept} ({start} {untrained}, {result.heldout_tokens} "
          f"tokens) · {config.steps} steps in {result.train_seconds:.0f} s · {path}")
    return 0


FEATURE_HEAD_TRAINER = Trainer("feature-head", help="EAGLE's feature-level draft head (Li et al. 2024, section 4)",
    description="Trains a draft head that predicts the target's next last-layer feature from its current "
                "one and the next token's embedding (EAGLE), on the target's answers to the prompt bank "
                "(assets/train_prompts.json; shipped in assets/selfgen/, else generated) and the frozen "
                "target's features (cached). Seeded; resumes from its checkpoint.",
    add_arguments=_arguments, run=_train)
