"""Command line: ``python -m explorer run ...`` decodes one prompt and prints the text and a summary.

Bad arguments and user errors exit with status 2 and one line on stderr, never a stack trace.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

from .errors import ExplorerError, one_line
from .limits import clip


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one clear line, exit 2
        command = self.prog.removeprefix("python -m explorer").strip()
        message = " ".join(str(message).split())  # argparse quotes the value: it may be huge or hold newlines
        message = message if len(message) <= 200 else message[:199] + "…"
        self.exit(2, f"error: {message} (see `python -m explorer {command + ' ' if command else ''}--help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from .api import METHODS
    from .engine.controllers import CONTROLLERS, DEFAULT_CONTROLLER, DEFAULT_GAMMA

    parser = _Parser(prog="python -m explorer", description="The Speculative Decoding Explorer")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="decode one prompt and print the text and a summary")
    run.add_argument("--prompt", help="the prompt text (wrapped in the chat template unless --raw)")
    run.add_argument("--prompt-ids", help="comma-separated token ids instead of --prompt")
    run.add_argument("--model", default="default", help="default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]]")
    run.add_argument("--method", choices=list(METHODS), help="default: speculative with --draft, else ar")
    run.add_argument("--draft", help="model:<name> | early-exit:N | prompt-lookup:n")
    run.add_argument("--gamma", type=int, help="tokens drafted per round (the start value for heuristic, the cap "
                     "for beta-ts/cali-ts); default 4, or the eesd preset's")
    run.add_argument("--controller", choices=list(CONTROLLERS), help="default fixed, or the eesd preset's")
    run.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    run.add_argument("--top-k", type=int, default=0, help="0 = off")
    run.add_argument("--top-p", type=float, default=1.0, help="1 = off")
    run.add_argument("--max-new-tokens", type=int, default=64)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--raw", action="store_true", help="use the prompt as it is, without the chat template")
    run.add_argument("--device", help="cpu | cuda (default: cuda when present)")
    run.add_argument("--dtype", help="float32 | bfloat16 | float16 (default: bf16 on CUDA, fp32 on CPU)")
    run.add_argument("--out", help="write the trace as JSON to this file ('-' prints the JSON instead of the text)")
    run.add_argument("--vs-ar", action="store_true", help="also decode plain (ar) on the same prompt and settings: "
                     "print the speed-up, whether the outputs match, and why the run had its speed")
    _add_method_options(run)

    from .bench import DEFAULT_SYSTEMS
    from .whatif import DEFAULT_DRAFT_COST

    bench = sub.add_parser("bench", help="benchmark HF generate and our methods side by side")
    bench.add_argument("--model", default="default")
    bench.add_argument("--system", action="append", dest="systems", metavar="NAME",
                       help=f"hf-generate | ar | speculative:<draft> (repeatable; default: {' '.join(DEFAULT_SYSTEMS)})")
    bench.add_argument("--repeats", type=int, default=3)
    bench.add_argument("--max-new-tokens", type=int, default=64)
    bench.add_argument("--temperature", type=float, default=0.0)
    bench.add_argument("--gamma", type=int, default=DEFAULT_GAMMA)
    bench.add_argument("--controller", default=DEFAULT_CONTROLLER, choices=list(CONTROLLERS))
    bench.add_argument("--device", help="cpu | cuda (default: cuda when present)")
    bench.add_argument("--dtype", help="float32 | bfloat16 | float16 (default: bf16 on CUDA, fp32 on CPU)")
    bench.add_argument("--quick", action="store_true", help="one prompt per category, 24 tokens, 1 repeat (under 2 minutes)")
    bench.add_argument("--out", default="bench.json", help="JSON report (default bench.json)")
    bench.add_argument("--markdown", help="also write the markdown table to this file")

    sweep = sub.add_parser("sweep", help="sweep a lossy method's thresholds (quality against cost), the theory lab (measured against Theorem 3.8), or beam search against Hugging Face's (004's Table 3)")
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

    racing = sub.add_parser("race", help="plain decoding against up to three systems on one prompt, lanes taking "
                                         "turns by their own clocks; prints the speed-ups (the page's race)")
    racing.add_argument("--prompt", help="the prompt (or --shipped: one shipped prompt per category)")
    racing.add_argument("--shipped", action="store_true", help="race one shipped prompt of each category")
    racing.add_argument("--lane", action="append", dest="lanes", metavar="SYSTEM",
                        help="a system as bench names it, or bild:<draft> (repeatable, at most 3; default: "
                             "speculative:prompt-lookup:3, eesd, bita)")
    racing.add_argument("--model", default="default")
    racing.add_argument("--max-new-tokens", type=int, default=64)
    racing.add_argument("--temperature", type=float, default=0.0)
    racing.add_argument("--out", help="write the (last) race's report as JSON, for the page's Compare view")

    audit = sub.add_parser("audit", help="is a method lossless here? greedy diff against plain decoding, and a χ² "
                                         "sampling audit of the first token against the target's distribution")
    audit.add_argument("--prompt", required=True, help="the prompt text (wrapped in the chat template unless --raw)")
    audit.add_argument("--model", default="default", help="default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]]")
    audit.add_argument("--method", choices=list(METHODS), help="default: speculative with --draft")
    audit.add_argument("--draft", help="model:<name> | early-exit:N | prompt-lookup:n")
    audit.add_argument("--gamma", type=int)
    audit.add_argument("--controller", choices=list(CONTROLLERS))
    audit.add_argument("--max-new-tokens", type=int, default=64, help="greedy audit: tokens compared")
    audit.add_argument("--runs", type=int, default=200, help="sampling audit: seeded runs (0: greedy audit only)")
    audit.add_argument("--temperature", type=float, default=1.0, help="sampling audit's temperature (> 0)")
    audit.add_argument("--top-k", type=int, default=0, help="0 = off")
    audit.add_argument("--top-p", type=float, default=1.0, help="1 = off")
    audit.add_argument("--seed", type=int, default=0, help="the sampling audit's first seed")
    audit.add_argument("--raw", action="store_true", help="use the prompt as it is, without the chat template")
    _add_method_options(audit)

    profile = sub.add_parser("profile", help="measure T(n), the target's forward cost for n new tokens, and its parts")
    profile.add_argument("--model", default="default")
    profile.add_argument("--tokens", default="1,2,3,4,5,8,16", help="the n to measure, comma-separated")
    profile.add_argument("--context", type=int, default=128, help="cached tokens before the measured ones")
    profile.add_argument("--repeats", type=int, default=15)
    profile.add_argument("--device", help="cpu | cuda (default: cuda when present)")
    profile.add_argument("--dtype", help="float32 | bfloat16 | float16")

    whatif = sub.add_parser(
        "whatif", help="acceptance by draft position and the best γ from vLLM, SGLang or llama.cpp metrics",
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

    from .tools.soak import MAX_CLIENTS, MAX_TOTAL_RUNS

    soak = sub.add_parser("soak", help="load-test the app's /decode API in-process on loopback (bounded)",
                          description="Serves the app on a loopback port in this process and drives its /decode "
                                      "API with concurrent gradio clients: completion, identical outputs against "
                                      "one-at-a-time reference decodes, RSS, latency, concurrency.")
    soak.add_argument("--clients", type=int, default=8, help=f"concurrent clients (at most {MAX_CLIENTS})")
    soak.add_argument("--runs", type=int, default=50, help=f"decodes per client (clients × runs at most {MAX_TOTAL_RUNS})")
    soak.add_argument("--max-new-tokens", type=int, default=16)
    soak.add_argument("--model", default="default", help="default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]]")
    soak.add_argument("--cancel-every", type=int, default=0, metavar="K",
                      help="cancel every K-th submission shortly after submitting it (0: never)")
    soak.add_argument("--seed", type=int, default=0)
    soak.add_argument("--host", default="127.0.0.1", help="loopback address to serve on (nothing else is accepted)")
    soak.add_argument("--out", help="also write the full report (every job, the RSS series) as JSON to this file")
    soak.add_argument("--adversarial", action="store_true",
                      help="instead: cancel long decodes (beam, speculative, ar) while they compute, upload files at "
                           "the size cap past the disk budget, read and draw the worst legal traces; reports CPU idle "
                           "time after each cancel, disk and RSS (default model here: tiny-random:1:16)")

    train = sub.add_parser("train", help="train a draft offline on the target's own answers (self-distillation)",
                           description="Offline trainers. Each writes an artifact (weights + JSON manifest) that "
                                       "the decoding methods find by the target model's fingerprint.")
    _add_trainers(train.add_subparsers(dest="trainer", required=True, parser_class=_Parser, metavar="TRAINER"))
    return parser


def _add_method_options(parser) -> None:
    """One flag per method option, from the registry (``explorer/methods``): ``--<keyword>`` with the
    option's help, default, range and paper reference. A flag not given is not passed (the method's own
    default applies); a flag of another method than the one run is refused by ``decode``."""
    from . import methods

    for method in methods.discover().values():
        for keyword, f in method.keywords().items():
            meta = f.metadata
            default = f"default {f.default:g}" if isinstance(f.default, (int, float)) else \
                (f"default {f.default}" if f.default is not None else f"default: {meta['none']}")
            allowed = methods.describe(f, with_none=f.default is not None) if meta["kind"] is not str else ""
            words = f"{method.name}: {meta['help']} (" + "; ".join(x for x in (default, allowed, meta["paper"]) if x) + ")"
            parser.add_argument("--" + keyword.replace("_", "-"), dest=keyword, type=meta["kind"],
                                default=argparse.SUPPRESS, choices=meta["choices"], help=words.replace("%", "%%"))


def method_options(args) -> dict:
    """The method-option flags given on the command line, as ``decode`` keywords."""
    from . import methods

    keywords = {k for m in methods.discover().values() for k in m.keywords()}
    return {k: v for k, v in vars(args).items() if k in keywords}


def _add_trainers(trainers) -> None:
    """One sub-command per trainer; each sets ``handler`` (add a trainer here)."""
    from .methods.eesd.exits import ARTIFACT_DIR

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
    ee.set_defaults(handler=_train_early_exit)

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
    theta.set_defaults(handler=_train_theta)

    from .methods.eagle.head import ARTIFACT_DIR as HEAD_DIR, MAX_LAYERS

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
    fh.set_defaults(handler=_train_feature_head)

    from .train.data import SHIPPED

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
    data.set_defaults(handler=_train_data)

    from .methods.bita.tokens import ARTIFACT_DIR as BITA_DIR

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
    bita.set_defaults(handler=_train_bita)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "train":
            return args.handler(args, argv if argv is not None else sys.argv[1:])
        return {"bench": _bench, "sweep": _sweep, "profile": _profile, "soak": _soak, "audit": _audit, "race": _race,
                "whatif": _whatif}.get(args.command, _run)(args)
    except ExplorerError as err:
        print(f"error: {one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _whatif(args) -> int:
    """``whatif``: read each file, analyse every drafter in it at one price, print words or JSON."""
    from . import whatif

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
        from .viz.whatif import whatif_figure

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
    from .whatif import MAX_METRICS_BYTES

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
    from .whatif import explain

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


def _run(args) -> int:
    from .api import decode

    if (args.prompt is None) == (args.prompt_ids is None):
        raise ExplorerError("give exactly one of --prompt TEXT or --prompt-ids 1,2,3")
    prompt_ids = None
    if args.prompt_ids is not None:
        try:
            prompt_ids = [int(x) for x in args.prompt_ids.split(",") if x.strip()]
        except ValueError:
            raise ExplorerError("--prompt-ids must be comma-separated whole numbers, e.g. 1,2,3") from None
    trace = decode(
        args.model, args.prompt, prompt_ids=prompt_ids, method=args.method, draft=args.draft, gamma=args.gamma,
        controller=args.controller, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
        max_new_tokens=args.max_new_tokens, seed=args.seed, chat=not args.raw, device=args.device, dtype=args.dtype,
        **method_options(args),
    )
    if args.out == "-":
        print(trace.to_json())
        return 0
    if args.out:
        try:
            with open(args.out, "w", encoding="utf-8") as fh:
                fh.write(trace.to_json())
        except OSError as err:
            raise ExplorerError(f"cannot write the trace to {args.out!r}: {err.strerror}") from None
    print(trace.text)
    print(summary_line(trace), file=sys.stderr if os.environ.get("EXPLORER_SUMMARY_TO_STDERR") else sys.stdout)
    if args.vs_ar:
        print(_against_plain(trace, args))
    return 0


def _against_plain(trace, args) -> str:
    """Plain decoding on the same prompt ids and settings: its speed, the ratio, the match, and the run's
    speed explained (``viz.speed_explanation``)."""
    from .api import decode
    from .quality import first_divergence
    from .viz import speed_explanation

    s = trace.settings
    plain = decode(args.model, prompt_ids=list(trace.prompt_ids), method="ar", temperature=s.temperature, top_k=s.top_k,
                   top_p=s.top_p, max_new_tokens=s.max_new_tokens, seed=s.seed, device=args.device, dtype=args.dtype)
    ratio = (trace.summary.tokens_per_s or 0) / plain.summary.tokens_per_s if plain.summary.tokens_per_s else 0.0
    differs = first_divergence(list(trace.output_ids), list(plain.output_ids))
    same = "identical output" if differs is None else f"output first differs at token {differs + 1}"
    line = f"vs plain decoding (ar): {plain.summary.tokens_per_s or 0:.1f} tok/s → ×{ratio:.2f}; {same}"
    return line + "\n" + _plain_text(speed_explanation(trace, plain))


def _race(args) -> int:
    """Race each prompt; print each race's × plain decoding per lane (and the medians over prompts)."""
    import statistics

    from . import bench, race

    if (args.prompt is None) == (not args.shipped):
        raise ExplorerError("give exactly one of --prompt TEXT or --shipped")
    lanes = args.lanes or ["speculative:prompt-lookup:3", "eesd", "bita"]
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
        report = race.race_report(race.run(race.start(args.model, text, lanes, temperature=args.temperature,
                                                      max_new_tokens=args.max_new_tokens)))
        cells = []
        for row in report["rows"][1:]:
            ratios.setdefault(row["system"], []).append(row["speedup_vs_ar"])
            same = {True: ", identical", False: ", differs", None: ""}[row["identical_to_ar"]]
            cells.append(f"{row['system']} ×{row['speedup_vs_ar']:.2f}{same}")
        print(f"{name}: ar {report['rows'][0]['tokens_per_s']:.1f} tok/s · " + " · ".join(cells), flush=True)
    if len(prompts) > 1:
        print("median × plain decoding: " + " · ".join(f"{k} ×{statistics.median(v):.2f}" for k, v in ratios.items()))
    if args.out:
        _write_report(report, args.out)
    return 0


def _write_report(report: dict, path: str) -> None:
    """A report as JSON at ``path``; one line when it cannot be written."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
    except OSError as err:
        raise ExplorerError(f"cannot write the report to {path!r}: {err.strerror}") from None


def _audit(args) -> int:
    """Print the greedy audit (this method against plain decoding) and, unless --runs 0, the sampling audit."""
    from .api import METHODS, decode
    from .audit import MAX_AUDIT_RUNS, greedy_audit, sampling_audit
    from .viz.audit import greedy_audit_text, sampling_audit_text
    from .viz.views import note_for

    if args.runs and not 10 <= args.runs <= MAX_AUDIT_RUNS:  # before the greedy audit spends its time
        raise ExplorerError(f"--runs must be 0 (greedy audit only) or from 10 to {MAX_AUDIT_RUNS}, got {args.runs}")

    method = args.method or ("speculative" if args.draft else "ar")
    if method not in METHODS:
        raise ExplorerError(f"unknown method {method!r}")
    common = dict(method=method, draft=args.draft, gamma=args.gamma, controller=args.controller, chat=not args.raw,
                  **method_options(args))
    def say(line: str) -> None:  # progress on stderr: the audit's words alone go to stdout
        print(line, file=sys.stderr, flush=True)

    if args.runs and not args.temperature > 0:  # before any work, and before any progress line
        raise ExplorerError("the sampling audit needs a temperature above 0 (greedy runs have the greedy audit)")
    trace = decode(args.model, args.prompt, max_new_tokens=args.max_new_tokens, **common)
    plain = decode(args.model, args.prompt, method="ar", max_new_tokens=args.max_new_tokens, chat=not args.raw)
    print(_plain_text(greedy_audit_text(trace, plain, greedy_audit(trace, plain))), flush=True)
    if args.runs:
        started = time.perf_counter()

        def progress(done: int, total: int) -> None:
            if done == 1 or done % max(1, total // 10) == 0 or done == total:
                left = (time.perf_counter() - started) / done * (total - done)
                say(f"sampling audit: run {done} of {total}, about {left:.0f} s left")

        result = sampling_audit(args.model, args.prompt, runs=args.runs, temperature=args.temperature,
                                top_k=args.top_k, top_p=args.top_p, seed=args.seed, progress=progress, **common)
        note = note_for(method)
        print(_plain_text(sampling_audit_text(result, lossy=note is not None and note.lossy)))
    return 0


def _plain_text(markdown: str) -> str:
    """The audit's Markdown for a terminal: emphasis and Markdown escapes dropped."""
    return re.sub(r"\\(.)", r"\1", markdown.replace("**", ""))


def _profile(args) -> int:
    from .models import load
    from .profile import report

    try:
        sizes = tuple(int(x) for x in args.tokens.split(",") if x.strip())
    except ValueError:
        raise ExplorerError("--tokens must be comma-separated whole numbers, e.g. 1,2,4,8") from None
    if not sizes or sizes[0] != 1 or any(not 1 <= n <= 256 for n in sizes):
        raise ExplorerError("--tokens must start with 1 (the ratios are to T(1)) and stay within 1..256")
    if not 1 <= args.context <= 4096 or not 1 <= args.repeats <= 1000:
        raise ExplorerError("--context must be 1..4096 and --repeats 1..1000")
    print(report(load(args.model, device=args.device, dtype=args.dtype), sizes, args.context, args.repeats))
    return 0


def _bench(args) -> int:
    from . import bench

    if args.repeats < 1 or args.max_new_tokens < 1:
        raise ExplorerError("--repeats and --max-new-tokens must be at least 1")
    report = bench.run(args.model, tuple(args.systems or bench.DEFAULT_SYSTEMS), repeats=args.repeats,
                       max_new_tokens=args.max_new_tokens, temperature=args.temperature, gamma=args.gamma,
                       controller=args.controller, quick=args.quick, device=args.device, dtype=args.dtype)
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


def _sweep(args) -> int:
    from . import sweep
    from .bench import load_prompts

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
        report = sweep.beam_sweep(args.model, args.draft, tuple(int(w) for w in widths), max_new_tokens=args.max_new_tokens,
                                  prompts=prompts)
        table = sweep.beam_markdown(report)
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


def _soak(args) -> int:
    from .tools import soak

    soak.check_host(args.host)  # refuse bad arguments before loading anything
    if args.adversarial:
        from .tools import soak_adversarial

        model = "tiny-random:1:16" if args.model == "default" else args.model
        report = soak_adversarial.run(model=model, host=args.host,
                                      progress=lambda line: print(line, file=sys.stderr, flush=True))
        if args.out:
            _write_report(report, args.out)
        print(soak_adversarial.summary(report))
        bad = [row for row in report["cancels"] if row["idle_after_s"] is None or row["idle_after_s"] > 2
               or row["most_computing"] > row["slots"]]
        return 1 if bad or report["uploads"]["folder_mb_after_trim"] > report["uploads"]["budget_mb"] else 0
    soak.check_args(args.clients, args.runs, args.max_new_tokens, args.cancel_every, args.seed)
    report = soak.run(clients=args.clients, runs=args.runs, max_new_tokens=args.max_new_tokens, model=args.model,
                      cancel_every=args.cancel_every, seed=args.seed, host=args.host,
                      progress=lambda line: print(line, file=sys.stderr, flush=True))
    if args.out:
        _write_report(report, args.out)
    print(soak.summary(report))
    c = report["completion"]
    return 0 if (report["correctness"]["identical"] == report["correctness"]["checked"]
                 and not c["errors"] and c["finished"] + c["cancelled"] == c["submitted"]) else 1


def _train_early_exit(args, argv: list[str]) -> int:
    import shlex
    from pathlib import Path

    from .models import load
    from .train.data import load_prompt_bank
    from .methods.eesd.train_exit import TrainConfig, train_early_exit, write_artifact

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


def _train_feature_head(args, argv: list[str]) -> int:
    import shlex
    from pathlib import Path

    from .methods.eagle.train import HeadTrainConfig, train_feature_head, write_artifact
    from .models import load
    from .train.data import load_prompt_bank

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


def _train_data(args, argv: list[str]) -> int:
    import time
    from pathlib import Path

    from .models import load
    from .train.data import export_corpus, load_prompt_bank

    target = load(args.model, device=args.device)
    prompts = load_prompt_bank(path=Path(args.prompts)) if args.prompts else load_prompt_bank()
    start = time.perf_counter()
    written = export_corpus(target, prompts, args.tokens, args.mode, args.max_new_tokens, folder=Path(args.out))
    for path in written:
        print(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
    print(f"{len(written)} archives in {time.perf_counter() - start:.0f} s")
    return 0


def _train_theta(args, argv: list[str]) -> int:
    import shlex
    from pathlib import Path

    from .methods.eesd.exits import ARTIFACT_DIR, find_exit, load_exit, untrained_exit
    from .models import load
    from .train.data import load_prompt_bank
    from .methods.eesd.train_theta import train_theta

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


def _train_bita(args, argv: list[str]) -> int:
    import shlex
    from pathlib import Path

    from .methods.bita.tokens import ARTIFACT_DIR as BITA_DIR
    from .artifacts import fingerprint
    from .models import load
    from .methods.bita.train import BitaTrainConfig, train_bita, write_artifact
    from .train.data import load_prompt_bank

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


def summary_line(trace) -> str:
    """One line: method, tokens, speed, acceptance."""
    s = trace.summary
    parts = [f"[{trace.method}{' ' + trace.draft if trace.draft else ''}]", f"{s.new_tokens} tokens",
             f"{s.wall_s:.2f} s", f"{s.tokens_per_s or 0:.1f} tok/s", f"{s.rounds} rounds",
             f"{s.tokens_per_target_forward or 0:.2f} tok/target-forward"]
    if s.acceptance_rate is not None:
        parts.append(f"acceptance {s.acceptance_rate:.0%}")
    if s.hm is not None:
        parts.append(f"r_d {s.r_d:.0%} · HM {s.hm:.0%}")
    parts.append(f"stop: {s.stop_reason}")
    line = " · ".join(parts)
    return f"{line}\ndraft: {trace.draft_about}" if trace.draft_about and trace.draft_about != trace.draft else line
