"""``python -m explorer audit``: the greedy audit against plain decoding and the χ² sampling audit."""

from __future__ import annotations

import sys
import time

from ..errors import ExplorerError
from .common import add_dtype, add_method_options, method_options, plain_text


# what `python -m explorer --help` lists, without importing what the command needs
HELP = ("is a method lossless here? greedy diff against plain decoding, and a χ² sampling audit of the first token "
        "against the target's distribution")


def add_parser(sub) -> None:
    from ..api import METHODS
    from ..drafts import draft_forms
    from ..engine.controllers import CONTROLLERS

    audit = sub.add_parser("audit", help=HELP)
    audit.add_argument("--prompt", required=True, help="the prompt text (wrapped in the chat template unless --raw)")
    audit.add_argument("--model", default="default", help="default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]]")
    add_dtype(audit)
    audit.add_argument("--method", choices=list(METHODS), help="default: speculative with --draft")
    audit.add_argument("--draft", help=draft_forms() + " (a method's own draft where it has one)")
    audit.add_argument("--gamma", type=int)
    audit.add_argument("--controller", choices=list(CONTROLLERS))
    audit.add_argument("--max-new-tokens", type=int, default=64, help="greedy audit: tokens compared")
    audit.add_argument("--runs", type=int, default=200, help="sampling audit: seeded runs (0: greedy audit only)")
    audit.add_argument("--temperature", type=float, default=1.0, help="sampling audit's temperature (> 0)")
    audit.add_argument("--top-k", type=int, default=0, help="0 = off")
    audit.add_argument("--top-p", type=float, default=1.0, help="1 = off")
    audit.add_argument("--seed", type=int, default=0, help="the sampling audit's first seed")
    audit.add_argument("--raw", action="store_true", help="use the prompt as it is, without the chat template")
    add_method_options(audit)
    audit.set_defaults(handler=handle)


def handle(args) -> int:
    """Print the greedy audit (this method against plain decoding) and, unless --runs 0, the sampling audit."""
    from ..api import METHODS, decode
    from ..audit import MAX_AUDIT_RUNS, check_audit_temperature, greedy_audit, sampling_audit
    from ..viz.audit import greedy_audit_text, sampling_audit_text

    if args.runs and not 10 <= args.runs <= MAX_AUDIT_RUNS:  # before the greedy audit spends its time
        raise ExplorerError(f"--runs must be 0 (greedy audit only) or from 10 to {MAX_AUDIT_RUNS}, got {args.runs}")

    method = args.method or ("speculative" if args.draft else "ar")
    if method not in METHODS:
        raise ExplorerError(f"unknown method {method!r}")
    common = dict(method=method, draft=args.draft, gamma=args.gamma, controller=args.controller, chat=not args.raw,
                  dtype=args.dtype, **method_options(args))
    def say(line: str) -> None:  # progress on stderr: the audit's words alone go to stdout
        print(line, file=sys.stderr, flush=True)

    if args.runs:  # before any work, and before any progress line
        check_audit_temperature(args.temperature)
    trace = decode(args.model, args.prompt, max_new_tokens=args.max_new_tokens, **common)
    plain = decode(args.model, args.prompt, method="ar", max_new_tokens=args.max_new_tokens, chat=not args.raw,
                   dtype=args.dtype)
    print(plain_text(greedy_audit_text(trace, plain, greedy_audit(trace, plain))), flush=True)
    if args.runs:
        started = time.perf_counter()

        def progress(done: int, total: int) -> None:
            if done == 1 or done % max(1, total // 10) == 0 or done == total:
                left = (time.perf_counter() - started) / done * (total - done)
                say(f"sampling audit: run {done} of {total}, about {left:.0f} s left")

        result = sampling_audit(args.model, args.prompt, runs=args.runs, temperature=args.temperature,
                                top_k=args.top_k, top_p=args.top_p, seed=args.seed, progress=progress, **common)
        print(plain_text(sampling_audit_text(result, lossy=result.lossy)))
    return 0
