"""``python -m explorer run``: decode one prompt, print the text and a one-line summary (``--vs-ar``: against
plain decoding)."""

from __future__ import annotations

import os
import sys

from ..errors import ExplorerError
from .common import add_dtype, add_method_options, method_options, plain_text


# what `python -m explorer --help` lists, without importing what the command needs
HELP = "decode one prompt and print the text and a summary"


def add_parser(sub) -> None:
    from ..api import METHODS
    from ..drafts import draft_forms
    from ..engine.controllers import CONTROLLERS
    from ..methods import discover

    presets = ", ".join(name for name, method in discover().items() if method.preset is not None)

    run = sub.add_parser("run", help=HELP)
    run.add_argument("--prompt", help="the prompt text (wrapped in the chat template unless --raw)")
    run.add_argument("--prompt-ids", help="comma-separated token ids instead of --prompt")
    run.add_argument("--model", help="default | hf:ORG/NAME | tiny-random[:SEED[:LAYERS]] (default: default)")
    run.add_argument("--pair", help="a target with the draft that suits it: smollm2-1.7b (SmolLM2-1.7B drafted by the "
                     "default 135M model; needs the Hub, pays on a GPU) | tiny (offline stand-in); sets --model, and "
                     "--draft and --gamma where not given")
    run.add_argument("--method", choices=list(METHODS), help="default: speculative with --draft, else ar")
    run.add_argument("--draft", help=draft_forms() + " (a method's own draft where it has one)")
    run.add_argument("--gamma", type=int, help="tokens drafted per round (the start value for heuristic, the cap "
                     f"for beta-ts/cali-ts); default 4, or the preset's for the preset methods ({presets})")
    run.add_argument("--controller", choices=list(CONTROLLERS),
                     help=f"default fixed, or the preset's for the preset methods ({presets})")
    run.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    run.add_argument("--top-k", type=int, default=0, help="0 = off")
    run.add_argument("--top-p", type=float, default=1.0, help="1 = off")
    run.add_argument("--max-new-tokens", type=int, default=64)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--raw", action="store_true", help="use the prompt as it is, without the chat template")
    run.add_argument("--device", help="cpu | cuda (default: cuda when present)")
    add_dtype(run)
    run.add_argument("--out", help="write the trace as JSON to this file ('-' prints the JSON instead of the text)")
    run.add_argument("--vs-ar", action="store_true", help="also decode plain (ar) on the same prompt and settings: "
                     "print the speed-up, whether the outputs match, and why the run had its speed")
    add_method_options(run)
    run.set_defaults(handler=handle)


def handle(args) -> int:
    from ..api import stream

    if (args.prompt is None) == (args.prompt_ids is None):
        raise ExplorerError("give exactly one of --prompt TEXT or --prompt-ids 1,2,3")
    prompt_ids = None
    if args.prompt_ids is not None:
        try:
            prompt_ids = [int(x) for x in args.prompt_ids.split(",") if x.strip()]
        except ValueError:
            raise ExplorerError("--prompt-ids must be comma-separated whole numbers, e.g. 1,2,3") from None
    if args.pair is not None:
        from ..pairs import get_pair

        if args.model is not None:
            raise ExplorerError("give --pair or --model, not both (a pair names its target model)")
        pair = get_pair(args.pair)
        args.model, args.draft = pair.target, args.draft or pair.drafts[0]
        args.gamma = args.gamma if args.gamma is not None else pair.gamma
        print(f"pair {pair.name}: {pair.why()}", file=sys.stderr)
    args.model = args.model or "default"

    def start(method, max_new_tokens, session=""):
        return stream(
            args.model, args.prompt, prompt_ids=prompt_ids, method=method, draft=args.draft, gamma=args.gamma,
            controller=args.controller, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
            max_new_tokens=max_new_tokens, seed=args.seed, chat=not args.raw, device=args.device, dtype=args.dtype,
            session=session, **method_options(args))

    if args.vs_ar:  # both warmed before either is timed: a first call's set-up would land on one side only
        _plain(args, start(args.method, min(8, args.max_new_tokens), session=None).run(), 8).run()
    decoding = start(args.method, args.max_new_tokens)
    trace = (decoding.watch_pace() if args.vs_ar else decoding).run()  # a comparison needs the machine's pace
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
    """Plain decoding on the same prompt ids and settings: its speed, the ratio (or why it cannot be trusted:
    ``viz.trust``), the match, and the run's speed explained (``viz.speed_explanation``)."""
    from ..quality import first_divergence
    from ..viz import measured_speedup, speed_explanation, speedup_doubt

    plain = _plain(args, trace, trace.settings.max_new_tokens).watch_pace().run()
    ratio, doubt = measured_speedup(trace, plain), speedup_doubt(trace, plain)
    differs = first_divergence(list(trace.output_ids), list(plain.output_ids))
    same = "identical output" if differs is None else f"output first differs at token {differs + 1}"
    # one run each, one after the other: labelled as such (the pace held and the ratio is possible, or it is not
    # shown at all: ``viz.trust``)
    shown = (f"×{ratio:.2f} (one run each, one after the other; `bench` and the race take turns and measure fairly)"
             if ratio is not None else f"unreliable: {doubt.short}" if doubt else "–")
    line = f"vs plain decoding (ar): {plain.summary.tokens_per_s or 0:.1f} tok/s → {shown}; {same}"
    return line + "\n" + plain_text(speed_explanation(trace, plain))


def _plain(args, trace, max_new_tokens: int):
    """Plain decoding (``ar``) of ``trace``'s prompt ids with its sampling settings."""
    from ..api import stream

    s = trace.settings
    return stream(args.model, prompt_ids=list(trace.prompt_ids), method="ar", temperature=s.temperature, top_k=s.top_k,
                  top_p=s.top_p, max_new_tokens=max_new_tokens, seed=s.seed, device=args.device, dtype=args.dtype,
                  session=None)


def summary_line(trace) -> str:
    """One line: method, tokens, speed, acceptance."""
    s = trace.summary
    parts = [f"[{trace.method}{' ' + trace.draft if trace.draft else ''}]", f"{s.new_tokens} tokens",
             f"{s.wall_s:.2f} s", f"{s.tokens_per_s or 0:.1f} tok/s", f"{s.rounds} rounds",
             f"{s.tokens_per_target_forward or 0:.2f} tok/target-forward"]
    if s.acceptance_rate is not None:
        # the theory (and --vs-ar's explanation) uses α̂ = accepted ÷ tested: say where the two part
        tested = (f" (α̂ {s.alpha_hat:.2f} of those tested: a draft after a refused one is discarded untested)"
                  if s.alpha_hat is not None else "")
        parts.append(f"{s.acceptance_rate:.0%} of drafted tokens accepted{tested}")
    if s.hm is not None:
        parts.append(f"r_d {s.r_d:.0%} (the share of the output the draft wrote) · HM {s.hm:.0%} (harmonic mean of "
                     "v_d and r_d)")
    parts.append(f"stop: {s.stop_reason}")
    line = " · ".join(parts)
    return f"{line}\ndraft: {trace.draft_about}" if trace.draft_about and trace.draft_about != trace.draft else line
