"""``lookahead``: lookahead decoding (Fu et al., ICML 2024, arXiv 2402.02057): no draft model — the target itself
runs Jacobi iterations on a 2-D window of guesses beside each step (the lookahead branch), collects the n-grams
those iterations produce into a pool, and verifies the pool's n-grams that start with the last decided token
(the verification branch), both in the same forward under one attention mask. Lossless, greedy and sampled
(``engine.tree.walk``)."""

from __future__ import annotations

import dataclasses

from ...engine.rounds import run_rounds
from ...errors import ExplorerError
from ...run import Decoding
from ...trace.schema import COUNT, ID
from ...untrusted import ListOf, Record, one_of
from .. import Method, Options, Request, numbered_system, option, register
from .step import LookaheadStep

# bounds that keep a run's trace loadable: at most G·(N − 1) = 32 tree nodes (their attention rows grow as its
# square) and 4·16 window ids a round, so 4 096 rounds stay well inside the 32 MB a trace file may have
MAX_WINDOW, MAX_NGRAM, MAX_GUESSES = 16, 5, 8


@dataclasses.dataclass(frozen=True)
class LookaheadOptions(Options):
    prefix = "lookahead_"
    title = "Lookahead decoding: window, n-grams, guesses"
    window: int = option(2, "W: guesses per Jacobi step (the reference implementation: 7 for a 7B model on a GPU; "
                            "on a CPU each of the (N − 1)·W rows costs, and 2 was the fastest here)", low=1,
                         high=MAX_WINDOW, paper="Lookahead decoding 3.1, 5", symbol="W", label="W: window",
                         slider=(1, 12, 1))
    ngram: int = option(2, "N: the window keeps N − 1 Jacobi steps and a guess is N − 1 tokens (the reference "
                           "implementation: 5 for a 7B model; deeper is slower on a CPU)", low=2, high=MAX_NGRAM,
                        paper="Lookahead decoding 3.1, 5", symbol="N", label="N: n-gram size",
                        slider=(2, MAX_NGRAM, 1))
    guesses: int = option(2, "G: n-grams verified per step, and kept per first token (the reference "
                             "implementation: G = W)", low=1, high=MAX_GUESSES, paper="Lookahead decoding 3.2",
                          symbol="G", label="G: guesses verified", slider=(1, MAX_GUESSES, 1))
    pool: str = option("prompt", "prompt: the pool starts with the prompt's own n-grams (the reference "
                                 "implementation's POOL_FROM_PROMPT); window: only what the Jacobi window produces",
                       choices=("prompt", "window"), paper="Lookahead decoding 3.2", label="n-gram pool")


def start(request: Request, options: LookaheadOptions) -> Decoding:
    target = request.target
    step = LookaheadStep(target, options, request.sampling, request.rng(), request.prompt_ids, request.seed)
    settings = dataclasses.replace(request.settings, controller="lookahead", gamma=options.ngram - 1)
    rounds = run_rounds(target.device, target.eos_token_ids, step, request.prompt_ids, settings.max_new_tokens)
    o = options
    return Decoding(request, "lookahead", f"lookahead:W={o.window}:N={o.ngram}:G={o.guesses}", settings, rounds,
                    f"lookahead: a Jacobi window of {o.ngram - 1} × {o.window} guesses and up to {o.guesses} "
                    f"{o.ngram}-grams verified per step, pool from the {o.pool}")


def round_tokens(r) -> list[int]:
    """The window's and the guesses' ids (their text goes into the trace)."""
    d = r.detail or {}
    return [t for level in d.get("levels", ()) for t in level] + list(d.get("outputs", ())) + \
        [t for guess in d.get("guesses", ()) for t in guess]


_LEVEL = ListOf(ID, MAX_WINDOW, f"a list of at most {MAX_WINDOW} token ids")
# the keys lookahead's view reads from a round's detail (written by ``step``)
DETAIL = Record({
    "levels": ListOf(_LEVEL, MAX_NGRAM - 1, f"a list of at most {MAX_NGRAM - 1} levels of token ids"),
    "outputs": _LEVEL, "collected": COUNT, "new_grams": COUNT, "pool": COUNT,
    "guesses": ListOf(ListOf(ID, MAX_NGRAM - 1, f"a list of at most {MAX_NGRAM - 1} token ids"), MAX_GUESSES,
                      f"a list of at most {MAX_GUESSES} guesses"),
    "sources": ListOf(one_of(("prompt", "window")), MAX_GUESSES, f"a list of at most {MAX_GUESSES} of prompt|window"),
    "followed": ListOf(COUNT, MAX_GUESSES, f"a list of at most {MAX_GUESSES} counts"), "input_positions": COUNT,
}, strict=False)


def check_round(data: dict, path: str) -> None:
    """A window's levels are equally wide, each guess has its source and its count of tokens followed, and the
    verification tree is the guesses merged as a trie (``window.trie``): no more nodes than the guesses hold tokens,
    at most G·(N − 1) = 32 at the options' largest. The common tree checks allow BiTA's 1 024 inputs: a forged
    lookahead round of 1 024 nodes made its mask view a 1.19 M-cell figure (issue 40)."""
    d = data.get("detail", {})
    tree = data.get("tree") or {}
    most = sum(len(guess) for guess in d.get("guesses", ()))
    for key in ("nodes", "positions"):  # their kinds are checked after this (the common tree checks)
        if isinstance(tree.get(key), list) and len(tree[key]) > most:
            raise ExplorerError(f"{path}.tree has {len(tree[key])} {key}; the round's guesses hold {most} tokens, and "
                                "its tree merges them (a lookahead round verifies at most "
                                f"{MAX_GUESSES * (MAX_NGRAM - 1)} guess nodes)")
    widths = {len(level) for level in d.get("levels", ())} | ({len(d["outputs"])} if d.get("levels") else set())
    if len(widths) > 1:
        raise ExplorerError(f"{path}.detail: the window's levels and outputs must be equally wide")
    for key in ("followed", "sources"):
        if len(d.get(key, ())) != len(d.get("guesses", ())):
            raise ExplorerError(f"{path}.detail.{key} must have one entry per guess")


SYNTAX = "lookahead[:W[:N[:G]]]"


register(Method(
    name="lookahead",
    paper="Lookahead decoding (Fu et al. 2024)",
    summary="Lookahead decoding (Fu et al.): no draft model — the target runs Jacobi iterations on a window of guesses "
            "beside each step, pools the n-grams they produce and verifies those that fit, in the same forward",
    lossy=False,
    options=LookaheadOptions,
    start=start,
    draft="none",
    draft_words="Lookahead decoding drafts from its own Jacobi window and n-gram pool (see its options): no drafter",
    controller=False,
    detail=DETAIL,
    check_round=check_round,
    round_tokens=round_tokens,
    system=numbered_system("lookahead", ("lookahead_window", "lookahead_ngram", "lookahead_guesses"), SYNTAX),
    glossary="Lookahead decoding (Fu et al.): beside every step the target updates a **2-D window** of guesses — "
             "N − 1 **Jacobi** steps of W tokens, each guess recomputed from the guesses before it — and the columns "
             "of that window give **n-grams** the model itself produced; the **pool** keeps them by first token, and "
             "up to G that start with the last decided token are verified in the same forward. No draft model; "
             "lossless.",
    system_syntax=SYNTAX,
))
