"""``suffix``: SuffixDecoding (Oliaro et al., NeurIPS 2025, arXiv 2411.04975): drafts with no model — the
longest suffix of the context is looked up in the target's own earlier answers (the answers shipped in
``assets/selfgen/``, this session's finished runs) and in the prompt, and what followed it there grows a
speculation tree scored by how often each continuation occurred; the target verifies the tree in one forward
(tree attention). Lossless, greedy and sampled (``engine.tree.walk``)."""

from __future__ import annotations

import dataclasses

from ...artifacts import fingerprint
from ...engine.rounds import run_rounds
from ...errors import ExplorerError
from ...limits import clip
from ...run import Decoding
from ...trace.schema import COUNT, ID, NAME
from ...untrusted import ListOf, Maybe, Record, number
from .. import Method, Options, Request, SessionState, option, register
from .corpus import HISTORY, MAX_MATCH
from .step import SuffixStep

CORPORA = {"all": "the shipped answers, this session's earlier outputs and the prompt (the paper's global and "
                  "per-request trees)",
           "answers": "the target's answers to the training prompts shipped with the model",
           "history": "this session's finished outputs", "request": "the prompt and the answer so far"}


@dataclasses.dataclass(frozen=True)
class SuffixOptions(Options):
    prefix = "suffix_"
    title = "SuffixDecoding: the speculation tree"
    max_tokens: int = option(8, "the most tree nodes a round drafts (on a CPU verifying 8 tokens costs ≈ 1.4 "
                                "one-token forwards, 16 ≈ 1.9)", low=1, high=32, paper="SuffixDecoding 4.2",
                             label="most tree nodes", slider=(1, 24, 1))
    factor: float = option(1.0, "α: a match of p tokens drafts at most α·p nodes (MAX_SPEC = α·p: a longer match "
                                "is trusted with a bigger tree)", low=0.1, high=8.0, paper="SuffixDecoding 4.2",
                           symbol="α", label="α: nodes per matched token", slider=(0.25, 4, 0.25))
    min_prob: float = option(0.1, "a node is drafted only if its frequency-based probability is at least this",
                             low=0.0, high=1.0, paper="SuffixDecoding 4.2", label="least node probability",
                             slider=(0, 0.9, 0.05))
    size: str = option("priced", "how a tree's size is chosen: priced (cut where the expected tokens per verification "
                                 "cost peak, at this machine's measured T(n)/T(1): on a CPU every node costs) or paper "
                                 "(MAX_SPEC = α·p and the least probability only)", choices=("priced", "paper"),
                       paper="SuffixDecoding 4.2; Leviathan et al. Theorem 3.8", label="tree size")
    corpus: str = option("all", "what the context is matched against: " + "; ".join(f"{k}: {v}" for k, v in
                                                                                   CORPORA.items()),
                         choices=tuple(CORPORA), paper="SuffixDecoding 3", label="corpus")


def start(request: Request, options: SuffixOptions) -> Decoding:
    target = request.target
    fp = fingerprint(target.model)
    step = SuffixStep(target, options, request.sampling, request.rng(), request.prompt_ids, request.session, fp)
    settings = dataclasses.replace(request.settings, controller="suffix", gamma=options.max_tokens)
    rounds = run_rounds(target.device, target.eos_token_ids, step, request.prompt_ids, settings.max_new_tokens)
    return Decoding(request, "suffix", f"suffix:{options.corpus}", settings, rounds, about(step))


def about(step: SuffixStep) -> str:
    """The corpora a run matches against, in words (the trace's ``draft_about``)."""
    parts = []
    if step.index is not None:
        parts.append(f"{len(step.index.names)} shipped answers ({len(step.index.tokens):,} tokens; suffix array "
                     f"{'read' if step.index.loaded else 'built'} in {step.index.build_s:.1f} s, "
                     f"{step.index.nbytes / 2**20:.0f} MB)")
    elif step.options.corpus in ("all", "answers"):
        parts.append("no shipped answers for this model")
    if step.options.corpus in ("all", "history") and step.session is None:
        parts.append("no earlier outputs (this caller cannot be told apart from others: an MCP call)")
    elif step.options.corpus in ("all", "history"):
        parts.append(f"this session's earlier outputs ({int((step.history == step.sep).sum())} runs)")
    if step.options.corpus in ("all", "request"):
        parts.append("the prompt and the answer so far")
    return "suffix: " + " + ".join(parts)


def round_tokens(r) -> list[int]:
    """The matched suffix's ids (the tree's are named by the trace itself)."""
    return list(r.detail.get("matched", ()))


# the keys SuffixDecoding's view reads from a round's detail (written by ``step.record``)
DETAIL = Record({
    "source": Maybe(NAME), "match_length": COUNT, "occurrences": COUNT, "found_in": Maybe(NAME),
    "matched": ListOf(ID, MAX_MATCH, f"a list of at most {MAX_MATCH} token ids"), "nodes": COUNT,
    "score": number(0, 64), "counts": ListOf(COUNT, 64, "a list of at most 64 counts"), "input_positions": COUNT,
}, strict=False)


def system(rest: str) -> dict:
    """``suffix[:<corpus>][:<most nodes>]`` as decode keywords."""
    keywords = {}
    for part in filter(None, rest.split(":")):
        if part in CORPORA and "suffix_corpus" not in keywords:
            keywords["suffix_corpus"] = part
        elif part.isdigit() and "suffix_max_tokens" not in keywords:
            keywords["suffix_max_tokens"] = int(part)
        else:
            raise ExplorerError(f"bad system {clip('suffix:' + rest, 60)}: write suffix[:{'|'.join(CORPORA)}][:N]")
    return keywords


register(Method(
    name="suffix",
    paper="SuffixDecoding (Oliaro et al. 2025)",
    summary="SuffixDecoding (Oliaro et al.): no draft model — the longest suffix of the context found in the target's "
            "earlier answers and the prompt grows a token tree of what followed it, verified in one forward",
    lossy=False,
    options=SuffixOptions,
    start=start,
    draft="none",
    draft_words="SuffixDecoding drafts from its corpora of earlier outputs (see its options): no drafter",
    controller=False,
    detail=DETAIL,
    round_tokens=round_tokens,
    system=system,
    glossary="SuffixDecoding (Oliaro et al.): the **longest matching suffix** of the context is looked up in earlier "
             "outputs (the target's shipped answers, this session's runs) and in the prompt; what followed it there "
             "forms a **speculation tree**, each node scored by how often that continuation occurred (its "
             "**frequency-based probability**); a match of p tokens drafts at most α·p nodes. No draft model; "
             "lossless.",
    system_syntax=f"suffix[:{'|'.join(CORPORA)}][:N]",
    session_state=SessionState(HISTORY.export, HISTORY.replace),  # the session's finished outputs, kept by the app
))
