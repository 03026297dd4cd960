"""Command line: ``python -m explorer run ...`` decodes one prompt and prints the text and a summary.

One module per command (``run``, ``bench``, ``sweep``, ``race``, ``audit``, ``profile``, ``whatif``, ``soak``,
``train``), each with ``add_parser(sub)`` (its sub-parser, whose ``handler`` default is the command's handler)
and the handler itself; this package holds ``main``, ``build_parser`` and what several commands share.
Nothing heavy is imported before a command needs it.

Bad arguments and user errors exit with status 2 and one line on stderr, never a stack trace.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from ..errors import ExplorerError, one_line

class _Formatter(argparse.HelpFormatter):
    """Help wrapped at spaces only: a system or draft name (``hf-assisted:…``, ``eagle-tree``) broken at its hyphen
    reads as two words."""

    def _split_lines(self, text, width):
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):  # one clear line, exit 2
        command = self.prog.removeprefix("python -m explorer").strip()
        message = " ".join(str(message).split())  # argparse quotes the value: it may be huge or hold newlines
        message = message if len(message) <= 200 else message[:199] + "…"
        self.exit(2, f"error: {message} (see `python -m explorer {command + ' ' if command else ''}--help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from . import audit, bench, profile, race, run, soak, sweep, train, whatif

    parser = _Parser(prog="python -m explorer", description="The Speculative Decoding Explorer")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in (run, bench, sweep, race, audit, profile, whatif, soak, train):  # --help lists them in this order
        command.add_parser(sub)
    return parser


def _add_dtype(parser) -> None:
    """``--dtype``: the target's precision (a lossless run is exact against the target in that dtype)."""
    parser.add_argument("--dtype", help="float32 | bfloat16 | float16 (default: bf16 on CUDA, fp32 on CPU); a "
                                        "lossless method then equals plain decoding in that dtype")


def _add_method_options(parser) -> None:
    """One flag per method option, from the registry (``explorer/methods``): ``--<keyword>`` with the
    option's help, default, range and paper reference. A flag not given is not passed (the method's own
    default applies); a flag of another method than the one run is refused by ``decode``."""
    from .. import methods

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
    from .. import methods

    keywords = {k for m in methods.discover().values() for k in m.keywords()}
    return {k: v for k, v in vars(args).items() if k in keywords}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "train":  # a trainer writes its command line into the artifact's manifest
            return args.handler(args, argv if argv is not None else sys.argv[1:])
        return args.handler(args)
    except ExplorerError as err:
        print(f"error: {one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _write_report(report: dict, path: str) -> None:
    """A report as JSON at ``path``; one line when it cannot be written."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
    except OSError as err:
        raise ExplorerError(f"cannot write the report to {path!r}: {err.strerror}") from None


def _plain_text(markdown: str) -> str:
    """The audit's Markdown for a terminal: emphasis and Markdown escapes dropped."""
    return re.sub(r"\\(.)", r"\1", markdown.replace("**", ""))
