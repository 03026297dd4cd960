"""What several commands share: the parser that answers a bad argument in one line, the ``--dtype`` flag, the
method-option flags from the registry, the report writer and the audit's text for a terminal."""

from __future__ import annotations

import argparse
import json
import re

from ..errors import ExplorerError


class _Formatter(argparse.HelpFormatter):
    """Help wrapped at spaces only: a system or draft name (``hf-assisted:…``, ``eagle-tree``) broken at its hyphen
    reads as two words."""

    def _split_lines(self, text, width):
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):  # one clear line, exit 2
        command = self.prog.removeprefix("python -m explorer").strip()
        message = " ".join(str(message).split())  # argparse quotes the value: it may be huge or hold newlines
        message = message if len(message) <= 200 else message[:199] + "…"
        self.exit(2, f"error: {message} (see `python -m explorer {command + ' ' if command else ''}--help`)\n")


def add_dtype(parser) -> None:
    """``--dtype``: the target's precision (a lossless run is exact against the target in that dtype)."""
    parser.add_argument("--dtype", help="float32 | bfloat16 | float16 (default: bf16 on CUDA, fp32 on CPU); a "
                                        "lossless method then equals plain decoding in that dtype")


def add_method_options(parser) -> None:
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


def write_report(report: dict, path: str) -> None:
    """A report as JSON at ``path``; one line when it cannot be written."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
    except OSError as err:
        raise ExplorerError(f"cannot write the report to {path!r}: {err.strerror}") from None


def plain_text(markdown: str) -> str:
    """The audit's Markdown for a terminal: emphasis and Markdown escapes dropped."""
    return re.sub(r"\\(.)", r"\1", markdown.replace("**", ""))
