"""Command line: ``python -m explorer run ...`` decodes one prompt and prints the text and a summary.

One module per command (``run``, ``bench``, ``sweep``, ``race``, ``audit``, ``profile``, ``whatif``, ``soak``,
``train``), each with ``add_parser(sub)`` (its sub-parser, whose ``handler`` default is the command's handler)
and the handler itself; this package holds ``main`` and ``build_parser``, ``common`` what several commands share.
Nothing heavy is imported before a command needs it.

Bad arguments and user errors exit with status 2 and one line on stderr, never a stack trace.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import ExplorerError, one_line
from .common import Parser


def build_parser() -> argparse.ArgumentParser:
    from . import audit, bench, profile, race, run, soak, sweep, train, whatif

    parser = Parser(prog="python -m explorer", description="The Speculative Decoding Explorer")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in (run, bench, sweep, race, audit, profile, whatif, soak, train):  # --help lists them in this order
        command.add_parser(sub)
    return parser


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
