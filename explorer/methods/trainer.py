"""An offline trainer of a method's draft (``python -m explorer train <name>``), as a method's record lists it, and
the flags every trainer that learns from the target's own answers shares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Trainer:
    """An offline trainer of a method's draft: ``python -m explorer train <name>``. ``add_arguments(parser)``
    declares its flags; ``run(args, argv)`` trains, prints one line per artifact and returns the exit status
    (``argv``: the command line, written into each artifact's manifest)."""

    name: str
    help: str
    description: str
    add_arguments: Callable[[Any], None]
    run: Callable[[Any, list[str]], int]


def answer_flags(parser) -> None:
    """The flags of every trainer that learns from the target's own answers to the prompt bank: the
    answers' length cap, the bank, and where and in which dtype the target runs."""
    parser.add_argument("--max-new-tokens", type=int, default=256, help="length cap of the target's answers")
    parser.add_argument("--prompts", help="a prompt bank JSON file like assets/train_prompts.json (default: that file)")
    parser.add_argument("--device", help="cpu | cuda (default: cuda when present)")
    parser.add_argument("--dtype", default="float32", help="the target's dtype while training (default float32: "
                                                          "what decoding on the CPU runs)")
