"""``bild``: the Big Little Decoder (Kim et al., sections 3.3–3.5, Algorithm 1): the small model writes
until it is unsure (fallback), the large model reviews its tokens in one pass and replaces the first it
disagrees with strongly (rollback). Lossy by design."""

from __future__ import annotations

import dataclasses
import math

from .rounds import BildConfig, bild_rounds
from .sweep import SWEEP
from ...drafts import distribution_kinds, make_drafter
from ...errors import ExplorerError
from ...limits import MAX_GAMMA
from ...run import Decoding
from ...trace.schema import GAMMA, ID, PROB, RATIO
from ...untrusted import BOOL, Maybe, Record, one_of
from .. import Method, Options, Request, option, register


@dataclasses.dataclass(frozen=True)
class BildOptions(Options):
    title = "BiLD (lossy): fallback and rollback"

    fallback_threshold: float = option(
        0.6, "fall back to the large model when the small model's top probability max p_S is below this "
             "(0: never)", paper="BiLD 3.3", symbol="α_FB", low=0.0, high=1.0, label="α_FB: fall back below this max p_S",
             slider=(0, 1, 0.05))
    rollback_threshold: float | None = option(
        5.0, "roll back the first small token whose −log p_L under the large model exceeds this, in nats",
        kind=float, paper="BiLD 3.4, eq. 3", symbol="α_RB", low=0.0, infinite=True, none="never roll back (also: inf)",
        label="α_RB (nats): roll back above −log p_L", slider=(0, 20, 0.5))
    max_small_steps: int = option(10, "the cap on one small-model turn", paper="BiLD 3.3 (the paper's cap: 10)",
                                  low=1, high=MAX_GAMMA, label="max small-model steps", slider=(1, MAX_GAMMA, 1))

    def __post_init__(self):
        super().__post_init__()
        if self.rollback_threshold is not None and math.isinf(self.rollback_threshold):
            object.__setattr__(self, "rollback_threshold", None)  # ∞ and None both mean: never roll back


def start(request: Request, options: BildOptions) -> Decoding:
    drafter = make_drafter(request.draft, request.target, request.load, "bild")
    if not drafter.gives_distributions:
        raise ExplorerError("bild needs a small model that gives distributions: model:<name> or early-exit:N")
    config = BildConfig(options.fallback_threshold, options.rollback_threshold, options.max_small_steps)
    # BiLD decides its own draft lengths: the settings' γ is its cap, its controller the fallback rule
    settings = dataclasses.replace(request.settings, controller="bild", gamma=options.max_small_steps)
    rounds = bild_rounds(request.target, drafter, config, request.sampling, request.prompt_ids,
                         settings.max_new_tokens, request.rng())
    return Decoding(request, "bild", drafter.spec, settings, rounds, drafter.about)


ROLLBACK = Record({"position": GAMMA, "distance": RATIO, "replaced": ID, "replacement": ID, "flushed": GAMMA},
                  ("position", "distance", "replaced", "replacement", "flushed"), strict=False)
# the keys BiLD's views read from a round's detail (written by ``rounds.bild_rounds``)
DETAIL = Record({
    "reason": one_of(("confidence", "end", "cap")), "small_max_prob": Maybe(PROB), "fallback_threshold": Maybe(PROB),
    "rollback_threshold": Maybe(RATIO), "rollback": Maybe(ROLLBACK), "large_pass": BOOL,
}, strict=False)


def check_round(data: dict, path: str) -> None:
    """A loaded BiLD round: the keys its views read together are there together."""
    _check_bild_detail(data.get("detail", {}), f"{path}.detail")


def _check_bild_detail(detail: dict, path: str) -> None:
    """The keys BiLD's views read together: a confidence fallback's probability and threshold, a
    hand-over's reason beside its probability, a rollback's threshold."""
    needs = []
    if detail.get("reason") == "confidence":
        needs += ["small_max_prob", "fallback_threshold"]
    if detail.get("small_max_prob") is not None:
        needs.append("reason")
    if detail.get("rollback") is not None:
        needs.append("rollback_threshold")
    missing = next((k for k in needs if k not in detail), None)
    if missing is not None:
        raise ExplorerError(f"missing field {f'{path}.{missing}'!r} (BiLD's views read it with the others)")
    if detail.get("reason") == "confidence" and detail["small_max_prob"] is None:
        raise ExplorerError(f"{path}.small_max_prob must be a probability when the reason is confidence, got null")



register(Method(
    name="bild",
    paper="BiLD (Kim et al. 2023)",
    summary="Big Little Decoder (Kim et al.): the small model writes, the large one takes over and rolls back (lossy)",
    lossy=True,
    options=BildOptions,
    start=start,
    controller=False,
    detail=DETAIL,
    check_round=check_round,
    glossary="the Big Little Decoder (Kim et al.): the small model writes until its top probability max p_S falls "
             "below **α_FB** (a **fallback**: the large model takes the next token), and the large model reviews "
             "the small model's tokens in one pass and **rolls back** to the first whose −log p_L (nats) exceeds "
             "**α_RB**. Lossy: its output can differ from the large model's own.",
    drafts=lambda options: distribution_kinds(),
    default_draft="early-exit:8",
    draft_words="BiLD's small model writes by itself, so it must give distributions: a model draft (model:<name>, "
                "early-exit:N, int4 or int8).",
    sweeps=(SWEEP,),
))
