"""``lenient``: speculative sampling with Leviathan et al.'s lenience (Appendix A.5): accept a draft with
probability min(1, p(x) / (l·q(x))) and correct from norm(max(0, p − l·q)), so that no token is emitted
with more than 1/l times its target probability; greedy: accept a draft the target gives at least l × its
top probability. l = 1 is the exact method; below 1 it is lossy, and each round records which of its
accepts the exact rule would have refused."""

from __future__ import annotations

import dataclasses

from ...drafts import make_drafter
from ...limits import MAX_GAMMA
from ...untrusted import ListOf, Record, number, whole
from .. import Method, Options, Request, option, register
from ..speculative import run_speculative
from .sweep import SWEEP


@dataclasses.dataclass(frozen=True)
class LenientOptions(Options):
    title = "Lenience (lossy): how far a draft may stray from the target"

    lenience: float = option(0.5, "accept a draft with probability min(1, p/(l·q)); greedy: when p(x) ≥ l × the "
                                  "target's top probability; 1 is exact, lower accepts more and changes the "
                                  "output (no token more than 1/l × as likely as under the target)",
                             paper="Leviathan et al. A.5", symbol="l", low=0.01, high=1.0, slider=(0.05, 1, 0.05),
                             label="l: lenience (1 = exact)")


def start(request: Request, options: LenientOptions):
    drafter = make_drafter(request.draft, request.target, request.load)
    return run_speculative(request, drafter, "lenient", options.lenience)


# the keys the lenience view reads from a round's detail (written by the engine's round loop)
DETAIL = Record({"lenience": number(0.01, 1),
                 "lenient_accepts": ListOf(whole(0, MAX_GAMMA), MAX_GAMMA, "a list of draft positions")}, strict=False)


register(Method(
    name="lenient",
    paper="Leviathan et al. 2023, A.5",
    summary="speculative sampling with lenience l (Leviathan et al. A.5): accepts drafts the target finds at least "
            "l times as likely; lossy below l = 1",
    lossy=lambda options: options is None or options.lenience < 1,
    options=LenientOptions,
    start=start,
    detail=DETAIL,
    sweeps=(SWEEP,),
    glossary="speculative sampling with **lenience l** (Leviathan et al., Appendix A.5): a draft is accepted with "
             "probability min(1, p/(l·q)) (greedy: when p is at least l × the target's top probability). l = 1 is "
             "the exact rule; below 1 more drafts pass and the output can change (lossy).",
))
