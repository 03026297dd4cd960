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

import torch

from ...engine.cache import new_cache
from ...engine.costs import verify_cost_curve
from ...engine.forward import lm_head
from ...engine.rounds import TOP_ALTERNATIVES, Round, top_pairs
from ...engine.sampling import SamplingConfig
from ...engine.tree import TargetRows, TokenTree, compact_cache, priced_size, tree_forward, walk
from ...trace import RoundTrace, Timing
from .corpus import HISTORY, MAX_MATCH, Speculation, answer_index, scan_match, speculate


class SuffixStep:
    """The round step: drafts from the corpora, verifies the tree, keeps the accepted path."""

    def __init__(self, target, options, sampling: SamplingConfig, rng, prompt_ids: list[int], session: str,
                 fingerprint: str):
        self.model, self.head = target.model, lm_head(target.model)
        self.options, self.sampling = options, sampling
        self.generator = rng.on(target.device)
        self.sep = target.vocab_size  # no token has this id: the corpora's separator
        self.session, self.fingerprint = session, fingerprint
        self.prompt_len = len(prompt_ids)
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
            matches.append(scan_match(context, context, "request", MAX_MATCH))
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
        tail = context[self.cached:]
        drafted_at = clock()

        # 2. verify: one forward over the pending token(s) and the tree
        with torch.inference_mode():
            hidden = tree_forward(self.model, self.cache, tail, tree, self.cached)  # (R, H)
        p = TargetRows(self.head, hidden[len(tail) - 1:], self.sampling)
        p.all_if_small()
        verified_at = clock()

        # 3. accept
        with torch.inference_mode():
            path, token = walk(tree, p, self.sampling, self.generator)
        emitted, n_accepted = round.until_end([tree.tokens[i] for i in path] + [token], len(path))

        # 4. commit
        keep = len(context)
        with torch.inference_mode():
            compact_cache(self.cache, keep, [keep + i for i in path])
        self.cached = len(context) + len(path)
        context_len = round.commit(emitted)
        if len(emitted) == round.budget or emitted[-1] in round.eos:  # the run ends: remember its output
            HISTORY.add(self.fingerprint, self.session, context[self.prompt_len:])
        done_at = clock()
        timing = Timing(drafted_at - round.start, verified_at - drafted_at, done_at - verified_at)
        return lambda: record(round.index, context_len, tree, spec, path, emitted, n_accepted, p, len(tail), timing)


def priced(spec: Speculation, cost: list[float]) -> Speculation:
    """The first n nodes of ``spec`` (added best first, so any first n form a tree) for the n that pays best
    at zero draft cost (``engine.tree.priced_size``)."""
    n = priced_size(spec.probs, cost)
    return Speculation(spec.match, spec.tokens[:n], spec.parents[:n], spec.probs[:n], spec.counts[:n])


def tree_record(tree: TokenTree, spec: Speculation, path: list[int], p: TargetRows, n_tail: int) -> dict:
    """The round's ``tree`` in the trace's public shape (``RoundTrace.tree``; the same the tree view reads
    for BiTA, without mask tokens): each node's token, parent, depth, rank among its siblings, whether it
    was accepted, its draft probability q (the frequency-based score) and the target's p where computed."""
    on_path = set(path)
    known = p.known()
    ranks = []
    for i, parent in enumerate(tree.parents):
        ranks.append(tree.children(parent).index(i))
    p_nodes = [float(p[par + 1][t]) if par + 1 in known else None for t, par in zip(tree.tokens, tree.parents)]
    visible = tree.visible()
    return {
        "kind": "suffix", "masks": 0, "top_k": 0, "prompt_tokens": 0, "context_inputs": n_tail,
        "nodes": [{"token": t, "parent": par, "depth": d, "rank": r, "accepted": i in on_path,
                   "q": min(1.0, q), "p": pn}
                  for i, (t, par, d, r, q, pn) in enumerate(zip(tree.tokens, tree.parents, tree.depths, ranks, tree.q,
                                                                p_nodes))],
        "positions": [{"kind": "node", "node": i, "slot": 0, "offset": d} for i, d in enumerate(tree.depths)],
        "attention": ["".join("1" if v else "0" for v in row) for row in visible.tolist()],
        "sees_prompt": [False] * tree.n_nodes,
        "accepted_path": list(path),
        "next_group": None,
    }


def record(index, context_len, tree: TokenTree, spec: Speculation, path, emitted, n_accepted, p: TargetRows, n_tail,
           timing: Timing) -> RoundTrace:
    """Plain-data record of one round (off the timed path). ``drafted`` is the tree's path the target
    followed: the accepted nodes, then (where it stopped at a node with children) the most probable chain
    below."""
    node = path[-1] if path else -1
    drafted_nodes = list(path)
    tip = node
    while tree.children(tip):
        tip = max(tree.children(tip), key=lambda c: tree.q[c])
        drafted_nodes.append(tip)
    rejected = bool(tree.children(node))
    drafted = [tree.tokens[i] for i in drafted_nodes]
    target = p.rows([0] + [i + 1 for i in drafted_nodes])  # (K + 1, V): after the context, after each draft
    kinds = ["accepted"] * n_accepted
    if len(emitted) > n_accepted:
        kinds.append("target" if not tree.n_nodes else ("corrected" if rejected else "bonus"))
    event = "no-draft" if not tree.n_nodes else "rejected" if rejected else "all-accepted"
    match = spec.match
    detail = {"source": match.source if match else None, "match_length": match.length if match else 0,
              "occurrences": match.occurrences if match else 0, "found_in": (match.where or None) if match else None,
              "matched": [] if not match else [int(t) for t in _matched(match)],
              "nodes": tree.n_nodes, "score": round(spec.score, 4),
              "counts": list(spec.counts), "input_positions": n_tail + tree.n_nodes}
    return RoundTrace(
        index=index, context_len=context_len, drafted=tuple(drafted), q_drafted=tuple(min(1.0, tree.q[i]) for i in drafted_nodes),
        p_drafted=tuple(float(target[j][t]) for j, t in enumerate(drafted)), n_accepted=n_accepted,
        emitted=tuple(emitted), emitted_kind=tuple(kinds), p_emitted=tuple(float(target[j][t]) for j, t in enumerate(emitted)),
        event=event, timing=timing, rejected_at=len(path) if event == "rejected" else None,
        draft_top=tuple(tuple((tree.tokens[s], min(1.0, tree.q[s])) for s in tree.children(tree.parents[i]))
                        for i in drafted_nodes),
        target_top=top_pairs(torch.topk(target, min(TOP_ALTERNATIVES, target.shape[-1]), dim=-1)),
        draft_forwards=0, target_forwards=1, detail=detail, tree=tree_record(tree, spec, path, p, n_tail),
    )


def _matched(match) -> list[int]:
    """The matched suffix as it stands in its corpus: the ``length`` tokens before the first occurrence's
    continuation."""
    start = int(match.starts[0])
    return [int(t) for t in match.tokens[start - match.length:start]]
