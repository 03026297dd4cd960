"""One SuffixDecoding round (Oliaro et al., arXiv 2411.04975, Algorithm 1), on the round driver:

    1. draft   — the longest suffix of the context found in each corpus (``corpus``), a speculation tree grown
                 from each by the frequency-based score, the higher-scoring tree kept (no model runs)
    2. verify  — one target forward over [pending token | tree nodes] with tree attention (``engine.tree``)
    3. accept  — walk down the tree while the target's own token is a child: greedy, the longest matching
                 path; sampling, a draw from the target at every node (exact in distribution)
    4. commit  — the accepted nodes' keys and values move into place; a finished run's output joins the
                 session's history, which later runs match against

Shape legend: R input positions of the forward (pending token + nodes), V vocabulary.
"""

from __future__ import annotations

from ...engine.cache import new_cache
from ...engine.costs import verify_cost_curve
from ...engine.forward import lm_head
from ...engine.rounds import Round
from ...engine.sampling import SamplingConfig
from ...engine.tree import TokenTree, accept_tree, priced_size, tree_round_record, verify_tree
from ...trace import Timing
from ...drafts import chat_frame
from .corpus import HISTORY, MAX_MATCH, Speculation, answer_index, scan_match, speculate


class SuffixStep:
    """The round step: drafts from the corpora, verifies the tree, keeps the accepted path."""

    def __init__(self, target, options, sampling: SamplingConfig, rng, prompt_ids: list[int], session: str | None,
                 fingerprint: str):
        self.model, self.head = target.model, lm_head(target.model)
        self.options, self.sampling = options, sampling
        self.generator = rng.on(target.device)
        self.sep = target.vocab_size  # no token has this id: the corpora's separator
        self.session, self.fingerprint = session, fingerprint
        self.prompt_len = len(prompt_ids)
        # the request corpus is the prompt and the answer so far, with the chat template's own tokens hidden behind
        # the separator: what follows a match there is the user's text or the answer, never the template (#48)
        self.request_prompt = list(prompt_ids)
        frame = chat_frame(target)
        for a, b in frame.spans(list(prompt_ids)) if frame is not None else ():
            self.request_prompt[a:b] = [self.sep] * (b - a)
        self.index = answer_index(fingerprint, target.vocab_size) if options.corpus in ("all", "answers") else None
        self.history = HISTORY.corpus(fingerprint, session, self.sep) if options.corpus in ("all", "history") else None
        self.cache = new_cache()
        self.cached = 0  # context tokens whose keys and values are in the cache
        # T(1 + n)/T(1): what verifying the pending token and n nodes costs here (measured once per model)
        curve = verify_cost_curve(target, max_tokens=options.max_tokens + 1) if options.size == "priced" else None
        self.cost = None if curve is None else [t / curve[0] for t in curve]

    def draft(self, context: list[int], room: int) -> Speculation:
        """The highest-scoring speculation tree over the corpora (section 4.3), at most ``room`` nodes."""
        o = self.options
        matches = []
        if self.index is not None:
            matches.append(self.index.match(context, MAX_MATCH))
        if self.history is not None and len(self.history):
            matches.append(scan_match(self.history, context, "history", MAX_MATCH, exclude_end=False))
        if o.corpus in ("all", "request"):
            request = self.request_prompt + list(context[self.prompt_len:])
            matches.append(scan_match(request, context, "request", MAX_MATCH))
        best = Speculation(None)
        for match in matches:
            if match is None:
                continue
            size = min(room, o.max_tokens, int(o.factor * match.length + 1e-9))  # MAX_SPEC = α·p
            tree = speculate(match, size, o.min_prob, self.sep)
            if tree.score > best.score:
                best = tree
        return best if self.cost is None else priced(best, self.cost)

    def __call__(self, round: Round):
        clock, context = round.clock, round.context
        # 1. draft (leave room for the target's own token)
        spec = self.draft(context, round.budget - 1)
        tree = TokenTree.build(spec.tokens, spec.parents, spec.probs)
        drafted_at = clock()
        # 2. verify: one forward over the pending token(s) and the tree
        verified = verify_tree(self.model, self.head, self.cache, self.cached, context, tree, self.sampling)
        verified_at = clock()
        # 3. accept, 4. commit
        context_len = accept_tree(verified, tree, self.cache, round, self.sampling, self.generator)
        self.cached = context_len + len(verified.path)
        if len(verified.emitted) == round.budget or verified.emitted[-1] in round.eos:  # the run ends: remember it
            HISTORY.add(self.fingerprint, self.session, context[self.prompt_len:])
        timing = Timing(drafted_at - round.start, verified_at - drafted_at, clock() - verified_at)
        return lambda: tree_round_record(round.index, context_len, tree, spec.probs, verified, timing, kind="suffix",
                                         top_k=0, detail=detail(spec, tree, verified), draft_forwards=0)


def priced(spec: Speculation, cost: list[float]) -> Speculation:
    """The first n nodes of ``spec`` (added best first, so any first n form a tree) for the n that pays best
    at zero draft cost (``engine.tree.priced_size``)."""
    n = priced_size(spec.probs, cost)
    return Speculation(spec.match, spec.tokens[:n], spec.parents[:n], spec.probs[:n], spec.counts[:n])


def detail(spec: Speculation, tree: TokenTree, verified) -> dict:
    """The round's ``detail``: the match (corpus, length, occurrences, where, the suffix's ids) and the tree's
    size, score and counts (the schema is ``DETAIL`` in the method's record)."""
    match = spec.match
    return {"source": match.source if match else None, "match_length": match.length if match else 0,
            "occurrences": match.occurrences if match else 0, "found_in": (match.where or None) if match else None,
            "matched": [] if not match else _matched(match), "nodes": tree.n_nodes, "score": round(spec.score, 4),
            "counts": list(spec.counts), "input_positions": verified.n_tail + tree.n_nodes}


def _matched(match) -> list[int]:
    """The matched suffix as it stands in its corpus: the ``length`` tokens before the first occurrence's
    continuation."""
    start = int(match.starts[0])
    return [int(t) for t in match.tokens[start - match.length:start]]
