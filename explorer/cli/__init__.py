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


COMMANDS = ("run", "bench", "sweep", "race", "audit", "profile", "whatif", "soak", "train")  # --help lists them so


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser: every command's sub-parser in full, or (``command``) that one in full and the others by name
    and help only, so that a command reads no module another needs (``whatif`` and ``--help``: no torch). The
    command modules import nothing heavy until their ``add_parser`` or handler runs."""
    from . import audit, bench, profile, race, run, soak, sweep, train, whatif

    modules = {"run": run, "bench": bench, "sweep": sweep, "race": race, "audit": audit, "profile": profile,
               "whatif": whatif, "soak": soak, "train": train}
    parser = Parser(prog="python -m explorer", description="The Speculative Decoding Explorer")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in COMMANDS:
        if command is None or name == command:
            modules[name].add_parser(sub)
        else:
            sub.add_parser(name, help=modules[name].HELP)
    return parser


def _command(argv: list[str]) -> str:
    """The command ``argv`` names ("" where it names none: ``--help``, nothing, a typo), read as argparse will."""
    first = next((arg for arg in argv if not arg.startswith("-")), "")
    return first if first in COMMANDS else ""


def main(argv: list[str] | None = None) -> int:
    args = build_parser(_command(sys.argv[1:] if argv is None else argv)).parse_args(argv)
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
