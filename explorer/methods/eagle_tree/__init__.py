"""``eagle-tree``: EAGLE-2's dynamic draft tree (Li et al., EMNLP 2024, arXiv 2406.16858) on the shipped feature
head (``methods/eagle``): the head drafts several candidates per position, expands the ones it is most confident
the target will accept (a node's value: the product of the head's confidences down its path), keeps the best
``tokens`` of all it made, and the target verifies the tree in one forward (tree attention, ``engine.tree``).
Lossless, greedy and sampled (``engine.tree.walk``)."""

from __future__ import annotations

import dataclasses

from ...errors import ExplorerError
from ...run import Decoding
from ...trace.schema import COUNT
from ...untrusted import ListOf, Record, number
from ...engine.rounds import run_rounds
from .. import Method, Options, Request, numbered_system, option, register
from ..eagle.head import head_for
from .step import EagleTreeStep

MAX_TOKENS = 32


@dataclasses.dataclass(frozen=True)
class EagleTreeOptions(Options):
    prefix = "eagle_"
    title = "EAGLE-2: the dynamic draft tree"
    top_k: int = option(2, "k: nodes expanded per depth, and children each expanded node proposes (the paper: 10 on "
                           "a 7B model; 2 to 3 were fastest on this CPU)", low=1, high=10,
                        paper="EAGLE-2 4.2", symbol="k", label="k: top-k per depth", slider=(1, 8, 1))
    depth: int = option(2, "how many head steps deep the tree grows (the paper: 6; each step costs ≈ 0.12 of a "
                           "target forward here: 1 and 2 were fastest of 1–4)", low=1, high=8,
                        paper="EAGLE-2 4.2", label="depth", slider=(1, 8, 1))
    tokens: int = option(4, "m: the most nodes the target verifies, the highest-valued of all the head made (the "
                            "paper: 60; on a CPU verifying 16 tokens costs ≈ 1.9 one-token forwards)", low=1,
                         high=MAX_TOKENS, paper="EAGLE-2 4.3", symbol="m", label="m: tokens verified",
                         slider=(1, 24, 1))
    head: str = option("trained", "the feature head: trained (shipped for the model) or untrained (random FC, a copy "
                                  "of the target's last layer: the mechanics without the skill)",
                       choices=("trained", "untrained"), paper="EAGLE 4.1", label="feature head")
    size: str = option("priced", "how many of the m best to verify: priced (cut where expected tokens per round cost "
                                 "peak, the drafting spent plus this machine's measured T(n)/T(1)) or paper (all m)",
                       choices=("priced", "paper"), paper="EAGLE-2 4.3; Leviathan et al. Theorem 3.8", label="tree size")


def start(request: Request, options: EagleTreeOptions) -> Decoding:
    target = request.target
    head = head_for(target.model, trained=options.head == "trained")
    if options.head == "trained" and not head.trained:
        raise ExplorerError("eagle-tree needs a trained feature head for this model and none ships: train one with "
                            "`python -m explorer train feature-head --model <spec>`")
    step = EagleTreeStep(target, head, options, request.sampling, request.rng())
    settings = dataclasses.replace(request.settings, controller="eagle-2", gamma=options.tokens)
    rounds = run_rounds(target.device, target.eos_token_ids, step, request.prompt_ids, settings.max_new_tokens)
    return Decoding(request, "eagle-tree", "feature-head", settings, rounds,
                    f"feature-head: {head.describe()}; EAGLE-2 tree k = {options.top_k}, depth {options.depth}, "
                    f"m = {options.tokens} ({options.size})")


# the keys EAGLE-2's view reads from a round's detail (written by ``step.record``)
DETAIL = Record({
    "candidates": COUNT, "depth": COUNT, "head_forwards": COUNT, "nodes": COUNT,
    "value": ListOf(number(0, 1), MAX_TOKENS, f"a list of at most {MAX_TOKENS} values"),
    "expected": number(0, MAX_TOKENS + 1), "input_positions": COUNT,
}, strict=False)


SYNTAX = "eagle-tree[:m[:k[:depth]]]"


register(Method(
    name="eagle-tree",
    paper="EAGLE-2 (Li et al. 2024)",
    summary="EAGLE-2 (Li et al.): the trained feature head drafts a dynamic token tree — the nodes it is most confident "
            "in expanded, the best m kept — verified by the target in one forward",
    lossy=False,
    options=EagleTreeOptions,
    start=start,
    draft="none",
    draft_words="EAGLE-2 drafts with the feature head shipped for the model: no drafter to choose",
    controller=False,
    detail=DETAIL,
    system=numbered_system("eagle-tree", ("eagle_tokens", "eagle_top_k", "eagle_depth"), SYNTAX),
    glossary="EAGLE-2 (Li et al.): the feature head proposes its **top-k** tokens at each position; a node's **value** "
             "(the product of the head's confidences down its path) estimates the chance the target accepts it; the k "
             "best-valued nodes of each depth are expanded, and the **m** best of all are verified as one tree. No "
             "separate draft model; lossless.",
    system_syntax=SYNTAX,
))
