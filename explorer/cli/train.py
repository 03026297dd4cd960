"""``python -m explorer train TRAINER``: the offline trainers, one sub-command each (their handlers take the
command line too: it is written into each artifact's manifest)."""

from __future__ import annotations

from ..errors import ExplorerError


def add_parser(sub) -> None:
    from . import _Parser

    train = sub.add_parser("train", help="train a draft offline on the target's own answers (self-distillation)",
                           description="Offline trainers. Each writes an artifact (weights + JSON manifest) that "
                                       "the decoding methods find by the target model's fingerprint.")
    _add_trainers(train.add_subparsers(dest="trainer", required=True, parser_class=_Parser, metavar="TRAINER"))


def _add_trainers(trainers) -> None:
    """One sub-command per trainer; each sets ``handler`` (add a trainer here)."""
    from ..methods.eesd.exits import ARTIFACT_DIR

    ee = trainers.add_parser(
        "early-exit", help="EESD exit layer after the first N layers (sections 3.1-3.2)",
        description="Self-distils one exit layer on top of the target's first N layers (EESD 3.1-3.2): the "
                    "target answers the prompt bank (assets/train_prompts.json), then the layer learns the "
                    "target's next-token distributions. Data and features are cached; training resumes.")
    ee.add_argument("--model", default="default", help="the target: default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]]")
    ee.add_argument("--layers", type=int, action="append", required=True, metavar="N",
                    help="exit after the first N layers (repeatable: --layers 4 --layers 8)")
    ee.add_argument("--tokens", type=int, default=60_000, help="answer tokens of self-generated training data")
    ee.add_argument("--exit-layers", type=int, default=1, help="decoder layers of the exit itself (EESD: 1)")
    ee.add_argument("--steps", type=int, default=600, help="optimizer steps (AdamW)")
    ee.add_argument("--seed", type=int, default=0, help="training seed (the data's seed is fixed)")
    ee.add_argument("--vocab", type=int, default=0, metavar="V",
                    help="score only the V most frequent tokens (+ EOS): a cheaper draft step (0: all)")
    ee.add_argument("--loss", choices=["kl", "ce"], default="kl",
                    help="kl: KL(target || exit) over the target's top-64; ce: cross-entropy to its tokens")
    ee.add_argument("--mode", choices=["hybrid", "greedy+sample", "greedy", "sample"], default="hybrid",
                    help="how the target answers the bank (hybrid: greedy for some prompts, sampled for others; "
                         "greedy+sample: a greedy pass, then sampled passes)")
    ee.add_argument("--lr", type=float, default=1e-3)
    ee.add_argument("--batch", type=int, default=2, help="windows per step")
    ee.add_argument("--window", type=int, default=512, help="tokens per packed window")
    ee.add_argument("--max-new-tokens", type=int, default=256, help="length cap of the target's answers")
    ee.add_argument("--prompts", help="a prompt bank JSON file like assets/train_prompts.json (default: that file)")
    ee.add_argument("--device", help="cpu | cuda (default: cuda when present)")
    ee.add_argument("--dtype", default="float32", help="the target's dtype while training (default float32: "
                                                      "what decoding on the CPU runs)")
    ee.add_argument("--out", default=str(ARTIFACT_DIR), help=f"artifact folder (default {ARTIFACT_DIR})")
    ee.set_defaults(handler=handle_early_exit)

    theta = trainers.add_parser(
        "theta", help="cali-ts's θ_M predictor for a trained exit (EESD eq. 5)",
        description="Fits calibrated TS's acceptance predictor θ_M (EESD eq. 5, diagonal W^i) for each shipped "
                    "exit N on the target's greedy answers to the prompt bank, and measures it on the held-out "
                    "prompts against a constant. Written beside the exit; cali-ts uses it automatically.")
    theta.add_argument("--model", default="default", help="the target: default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]]")
    theta.add_argument("--layers", type=int, action="append", required=True, metavar="N",
                       help="the trained exit after N layers (repeatable)")
    theta.add_argument("--samples", type=int, default=48, help="train prompts (every 4th of the bank's train split) "
                                                              "answered afresh by sampling")
    theta.add_argument("--steps", type=int, default=400, help="full-batch AdamW steps")
    theta.add_argument("--seed", type=int, default=0)
    theta.add_argument("--max-new-tokens", type=int, default=256, help="length cap of the target's answers")
    theta.add_argument("--prompts", help="a prompt bank JSON file like assets/train_prompts.json (default: that file)")
    theta.add_argument("--device", help="cpu | cuda (default: cuda when present)")
    theta.add_argument("--dtype", default="float32", help="the target's dtype (default float32)")
    theta.add_argument("--exits", help=f"where the exits are, and where θ_M is written (default {ARTIFACT_DIR})")
    theta.set_defaults(handler=handle_theta)

    from ..methods.eagle.head import ARTIFACT_DIR as HEAD_DIR, MAX_LAYERS

    fh = trainers.add_parser(
        "feature-head", help="EAGLE's feature-level draft head (Li et al. 2024, section 4)",
        description="Trains a draft head that predicts the target's next last-layer feature from its current "
                    "one and the next token's embedding (EAGLE), on the target's answers to the prompt bank "
                    "(assets/train_prompts.json; shipped in assets/selfgen/, else generated) and the frozen "
                    "target's features (cached). Seeded; resumes from its checkpoint.")
    fh.add_argument("--model", default="default", help="the target: default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]]")
    fh.add_argument("--layers", type=int, default=1, help=f"decoder layers in the head (1 to {MAX_LAYERS})")
    fh.add_argument("--vocab", type=int, default=16384, metavar="V",
                    help="score only the V most frequent answer tokens (+ EOS): a cheaper draft step (0: all)")
    fh.add_argument("--tokens", type=int, default=1_500_000, help="answer tokens of self-generated training data")
    fh.add_argument("--steps", type=int, default=3000, help="optimizer steps (AdamW)")
    fh.add_argument("--unroll", type=int, default=3, help="draft steps trained per position (training-time test; "
                                                          "1: the paper's true features only)")
    fh.add_argument("--batch", type=int, default=4, help="windows of 512 tokens per step")
    fh.add_argument("--lr", type=float, default=1e-3)
    fh.add_argument("--w-feature", type=float, default=1.0, help="weight of the feature regression (smooth L1)")
    fh.add_argument("--w-token", type=float, default=1.0, help="weight of the KL to the target's top-64")
    fh.add_argument("--token-share", type=float, default=0.25,
                    help="share of positions whose token term is computed each step (the V'-row head is most of "
                         "a step's arithmetic)")
    fh.add_argument("--seed", type=int, default=0, help="training seed (the data's seed is fixed)")
    fh.add_argument("--mode", choices=["greedy+sample", "hybrid", "greedy", "sample"], default="greedy+sample",
                    help="how the target answers the bank (greedy+sample: a greedy pass, then sampled passes)")
    fh.add_argument("--max-new-tokens", type=int, default=256, help="length cap of the target's answers")
    fh.add_argument("--prompts", help="a prompt bank JSON file like assets/train_prompts.json (default: that file)")
    fh.add_argument("--device", help="cpu | cuda (default: cuda when present)")
    fh.add_argument("--dtype", default="float32", help="the target's dtype while training (default float32)")
    fh.add_argument("--precompute", type=int, action="append", default=[], metavar="N",
                    help="also cache the states after layer N in the same frozen pass (for train early-exit)")
    fh.add_argument("--out", default=str(HEAD_DIR), help=f"artifact folder (default {HEAD_DIR})")
    fh.set_defaults(handler=handle_feature_head)

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

    from ..methods.bita.tokens import ARTIFACT_DIR as BITA_DIR

    bita = trainers.add_parser(
        "bita", help="BiTA prompt and mask tokens on the frozen target (section 3.1)",
        description="Bi-directional tuning (BiTA 3.1): learns deep prompt tokens and mask tokens on the frozen "
                    "target from its own greedy answers to the prompt bank (assets/train_prompts.json), with the "
                    "SAR loss of eq. 1 at random split points. Seeded; resumes from its checkpoint.")
    bita.add_argument("--model", default="default", help="the target: default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]]")
    bita.add_argument("--prompt-tokens", type=int, default=16, help="P deep prompt tokens (0: mask tokens only)")
    bita.add_argument("--masks", type=int, default=3, help="M mask tokens")
    bita.add_argument("--steps", type=int, default=300, help="optimizer steps (AdamW)")
    bita.add_argument("--batch", type=int, default=4, help="answers per step")
    bita.add_argument("--groups", type=int, default=16, help="split points (mask groups) per answer and step")
    bita.add_argument("--lr", type=float, default=1e-2)
    bita.add_argument("--seed", type=int, default=0)
    bita.add_argument("--max-new-tokens", type=int, default=256, help="length cap of the target's answers")
    bita.add_argument("--prompts", help="a prompt bank JSON file like assets/train_prompts.json (default: that file)")
    bita.add_argument("--device", help="cpu | cuda (default: cuda when present)")
    bita.add_argument("--dtype", default="float32", help="the target's dtype while training (default float32)")
    bita.add_argument("--out", help=f"artifact file (default {BITA_DIR}/<model fingerprint>.safetensors)")
    bita.set_defaults(handler=handle_bita)


def handle_early_exit(args, argv: list[str]) -> int:
    import shlex
    from pathlib import Path

    from ..models import load
    from ..train.data import load_prompt_bank
    from ..methods.eesd.train_exit import TrainConfig, train_early_exit, write_artifact

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


def handle_feature_head(args, argv: list[str]) -> int:
    import shlex
    from pathlib import Path

    from ..methods.eagle.train import HeadTrainConfig, train_feature_head, write_artifact
    from ..models import load
    from ..train.data import load_prompt_bank

    if args.vocab < 0:
        raise ExplorerError("--vocab must be 0 (the whole vocabulary) or a positive count")
    config = HeadTrainConfig(layers=args.layers, vocab=args.vocab or None, tokens=args.tokens, steps=args.steps,
                             unroll=args.unroll, batch=args.batch, lr=args.lr, w_feature=args.w_feature,
                             w_token=args.w_token, token_share=args.token_share, seed=args.seed, mode=args.mode, max_new_tokens=args.max_new_tokens)
    target = load(args.model, device=args.device, dtype=args.dtype)
    prompts = load_prompt_bank(path=Path(args.prompts)) if args.prompts else None
    result = train_feature_head(target, config, prompts, precompute_layers=tuple(args.precompute))
    path = write_artifact(target, config, result, Path(args.out), "python -m explorer " + shlex.join(argv))
    accept = " / ".join(f"{a:.1%}" for a in result.heldout_acceptance)
    untrained = " / ".join(f"{a:.1%}" for a in result.untrained_acceptance)
    print(f"held-out greedy acceptance by draft position {accept} (untrained {untrained}, {result.heldout_tokens} "
          f"tokens) · {config.steps} steps in {result.train_seconds:.0f} s · {path}")
    return 0


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


def handle_theta(args, argv: list[str]) -> int:
    import shlex
    from pathlib import Path

    from ..methods.eesd.exits import ARTIFACT_DIR, find_exit, load_exit, untrained_exit
    from ..models import load
    from ..train.data import load_prompt_bank
    from ..methods.eesd.train_theta import train_theta

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


def handle_bita(args, argv: list[str]) -> int:
    import shlex
    from pathlib import Path

    from ..methods.bita.tokens import ARTIFACT_DIR as BITA_DIR
    from ..artifacts import fingerprint
    from ..models import load
    from ..methods.bita.train import BitaTrainConfig, train_bita, write_artifact
    from ..train.data import load_prompt_bank

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
