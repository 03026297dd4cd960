"""``python -m explorer profile``: T(n), the target's forward cost for n new tokens, and its parts."""

from __future__ import annotations

from ..errors import ExplorerError
from .common import add_dtype


# what `python -m explorer --help` lists, without importing what the command needs
HELP = "measure T(n), the target's forward cost for n new tokens, and its parts"


def add_parser(sub) -> None:
    profile = sub.add_parser("profile", help=HELP)
    profile.add_argument("--model", default="default")
    profile.add_argument("--tokens", default="1,2,3,4,5,8,16", help="the n to measure, comma-separated")
    profile.add_argument("--context", type=int, default=128, help="cached tokens before the measured ones")
    profile.add_argument("--repeats", type=int, default=15)
    profile.add_argument("--device", help="cpu | cuda (default: cuda when present)")
    profile.add_argument("--draft", help="also weigh one step of this low-bit draft (int4 or int8) against the "
                         "bytes it reads at this machine's measured bandwidth, and against T(n): how much of its "
                         "own speed lossless decoding keeps at best")
    add_dtype(profile)
    profile.set_defaults(handler=handle)


def handle(args) -> int:
    from ..models import load
    from ..profile import report

    try:
        sizes = tuple(int(x) for x in args.tokens.split(",") if x.strip())
    except ValueError:
        raise ExplorerError("--tokens must be comma-separated whole numbers, e.g. 1,2,4,8") from None
    if not sizes or sizes[0] != 1 or any(not 1 <= n <= 256 for n in sizes):
        raise ExplorerError("--tokens must start with 1 (the ratios are to T(1)) and stay within 1..256")
    if not 1 <= args.context <= 4096 or not 1 <= args.repeats <= 1000:
        raise ExplorerError("--context must be 1..4096 and --repeats 1..1000")
    target = load(args.model, device=args.device, dtype=args.dtype)
    print(report(target, sizes, args.context, args.repeats, args.draft))
    return 0
