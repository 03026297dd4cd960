"""``bita``: BiTA (Lin et al.): trained prompt and mask tokens make the target draft a token tree for
itself, verified while the next tree is drafted, in one forward pass; no draft model; lossless."""

from __future__ import annotations

import dataclasses

from ...run import Decoding
from ...errors import ExplorerError
from ...limits import clip
from ...trace.schema import COUNT, NAME
from ...untrusted import Record
from .. import Method, Options, Request, option, register
from .tokens import tokens_for
from .trainer import BITA_TRAINER
from .tree import MAX_TOP_K, TREE_KINDS, BitaConfig, bita_rounds


@dataclasses.dataclass(frozen=True)
class BitaOptions(Options):
    prefix = "bita_"
    title = "BiTA: draft tree and mask tokens"
    tree: str = option("efficient", "the draft tree: efficient (Figure 5: the top-k of each mask along the best "
                                    "path), full (every top-k expanded), straightforward (Figure 4: one chain)",
                       paper="BiTA 3.3, Figures 4–5", choices=tuple(TREE_KINDS), label="draft tree")
    masks: int | None = option(None, "M: mask tokens per group (how far one forward drafts ahead)", kind=int,
                               paper="BiTA 3.1", symbol="M", low=1, high=8, none="all the trained ones", label="M: mask tokens",
                               slider=(1, 3, 1))  # the shipped tokens have 3
    top_k: int = option(3, "candidates per mask position", paper="BiTA 3.3", low=1, high=MAX_TOP_K,
                        label="top-k candidates per mask", slider=(1, 5, 1))
    tokens: str | None = option(None, "the prompt and mask tokens: auto, untrained or the path of a .safetensors "
                                      "artifact", kind=str, none="auto: the tokens shipped for the model, else "
                                                                   "untrained", label="tokens", page=False)


def start(request: Request, options: BitaOptions) -> Decoding:
    tokens = tokens_for(request.target.model, options.tokens, options.masks)
    config = BitaConfig(options.tree, tokens.n_masks, options.top_k)
    settings = dataclasses.replace(request.settings, controller=f"bita-{config.tree}", gamma=config.masks)
    rounds = bita_rounds(request.target, tokens, config, request.sampling, request.prompt_ids,
                         settings.max_new_tokens, request.rng())
    return Decoding(request, "bita", f"bita:{tokens.name}", settings, rounds, tokens.describe())


# the keys BiTA's views read from a round's detail (written by ``tree.bita_rounds``)
DETAIL = Record({"tree": NAME, "masks": COUNT, "top_k": COUNT, "tokens": NAME, "input_positions": COUNT,
                 "nodes": COUNT}, strict=False)


def system(rest: str) -> dict:
    """``bita[:<tree>[:<k>]]`` (the shipped tokens) as decode keywords."""
    tree, _, k = rest.partition(":")
    if (k and not k.isdigit()) or (k and not tree):
        raise ExplorerError(f"bad system {clip('bita:' + rest, 60)}: write bita[:{'|'.join(TREE_KINDS)}[:k]]")
    return ({"bita_tree": tree} if tree else {}) | ({"bita_top_k": int(k)} if k else {})


register(Method(
    name="bita",
    paper="BiTA (Lin et al. 2024)",
    summary="BiTA (Lin et al.): trained mask tokens draft a token tree that the target verifies while drafting the "
            "next one, in one forward pass (no draft model)",
    lossy=False,
    options=BitaOptions,
    start=start,
    draft="none",
    draft_words="BiTA drafts with its own trained mask tokens: no drafter",
    controller=False,
    detail=DETAIL,
    system=system,
    glossary="BiTA (Lin et al.): trained **prompt tokens** and **mask tokens** (M of them) let the target draft for "
             "itself: in one forward it verifies the last **token tree** (candidates per position, checked together "
             "under a tree attention mask) and drafts the next from its masks. No draft model; lossless.",
    trainers=(BITA_TRAINER,),
    system_syntax=f"bita[:{'|'.join(TREE_KINDS)}[:k]]",
))
