"""Token trees verified in one target forward: the tree attention every tree-drafting method shares.

A draft that proposes several continuations at once proposes a *tree*: node i holds ``tokens[i]`` and hangs
under ``parents[i]`` (-1: under the last context token). One forward over [the context not cached yet | the
nodes] with an attention mask in which each node sees the context, its ancestors and itself, and with each
node's position id its depth below the last context token, gives at every node the logits sequential decoding
would compute after that node's path (SpecInfer's tree attention; BiTA's Figure 6 without its mask tokens).
The walk then follows the target's own token down the tree while it is a child (greedy: the longest matching
path; sampling: a draw from the target at every node, so the output is distributed exactly as the target's),
and the accepted nodes' keys and values are moved into place in the cache (``compact_cache``).

Shape legend: C cached context tokens, R new input positions (context tail + nodes), N nodes, H hidden size,
V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from ..trace import RoundTrace, Timing
from .forward import fast_decoder, run_layers
from .rounds import TOP_ALTERNATIVES, Round, top_pairs
from .sampling import SamplingConfig, choose, distribution


@dataclass(frozen=True)
class TokenTree:
    """Node i: ``tokens[i]`` under ``parents[i]`` (-1: a child of the context; parents come before their
    children), ``depths[i]`` (1 for the children of the context) and ``q[i]``, the draft's estimate that the
    target reaches it (its score; 1 where the draft has none)."""

    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    depths: tuple[int, ...]
    q: tuple[float, ...]

    @classmethod
    def build(cls, tokens, parents, q=None) -> "TokenTree":
        depths: list[int] = []
        for parent in parents:
            depths.append(1 if parent < 0 else depths[parent] + 1)
        return cls(tuple(int(t) for t in tokens), tuple(int(p) for p in parents), tuple(depths),
                   tuple(float(x) for x in (q if q is not None else [1.0] * len(tokens))))

    @property
    def n_nodes(self) -> int:
        return len(self.tokens)

    @cached_property
    def _children(self) -> dict[int, list[int]]:
        children: dict[int, list[int]] = {-1: []}
        for i, parent in enumerate(self.parents):
            children.setdefault(parent, []).append(i)
            children.setdefault(i, [])
        return children

    def children(self, node: int) -> list[int]:
        return self._children.get(node, [])

    def path_to(self, node: int) -> list[int]:
        """Node indices from the context down to ``node`` (empty for -1)."""
        path = []
        while node >= 0:
            path.append(node)
            node = self.parents[node]
        return path[::-1]

    def visible(self) -> torch.Tensor:
        """(N, N) bool: node i sees its ancestors and itself."""
        seen = torch.zeros(self.n_nodes, self.n_nodes, dtype=torch.bool)  # (N, N)
        for i in range(self.n_nodes):
            seen[i, self.path_to(i)] = True
        return seen


@dataclass(frozen=True)
class SideRows:
    """Rows that ride along in a tree's forward without touching it (lookahead decoding's Jacobi window): row
    e holds ``tokens[e]`` at ``offsets[e]`` positions after the last context token, sees the whole context and
    the side rows ``visible[e]`` marks ((E, E) bool); no tree node sees a side row, nor a side row a node. Their
    keys and values go into the cache after the nodes and are dropped with the nodes off the accepted path."""

    tokens: tuple[int, ...]
    offsets: tuple[int, ...]
    visible: torch.Tensor  # (E, E) bool
    read: int = 0  # how many of the last rows the caller reads logits of (0: all)

    @property
    def n_rows(self) -> int:
        return len(self.tokens)


def tree_mask(tree: TokenTree, n_cached: int, n_tail: int, dtype: torch.dtype,
              side: SideRows | None = None) -> torch.Tensor:
    """Additive (1, 1, R, C + R) mask for one forward over [tail | nodes | side rows] after C cached tokens:
    the tail is causal, every node sees the whole context (cache and tail) and its own ancestors, every side
    row the whole context and the side rows it is given."""
    n_side = side.n_rows if side is not None else 0
    r = n_tail + tree.n_nodes + n_side
    allowed = torch.zeros(r, n_cached + r, dtype=torch.bool)  # (R, C + R)
    allowed[:, :n_cached] = True
    allowed[:n_tail, n_cached:n_cached + n_tail] = torch.ones(n_tail, n_tail, dtype=torch.bool).tril()
    allowed[n_tail:, n_cached:n_cached + n_tail] = True
    nodes = n_cached + n_tail
    allowed[n_tail:n_tail + tree.n_nodes, nodes:nodes + tree.n_nodes] = tree.visible()
    if n_side:
        allowed[r - n_side:, n_cached + r - n_side:] = side.visible
    additive = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    return additive[None, None]


def tree_forward(model: torch.nn.Module, cache, tail: list[int], tree: TokenTree, n_cached: int,
                 side: SideRows | None = None) -> torch.Tensor:
    """One target forward over [tail | nodes | side rows] (tail: the context tokens not cached yet, at least
    the pending one); the final normed hidden states (R, H), the LM head left to the caller (``TargetRows``).
    Position ids: the tail continues the context, a node sits at its depth below the last context token, a
    side row at its offset."""
    base = fast_decoder(model)
    device = base.embed_tokens.weight.device
    side_tokens, side_offsets = (list(side.tokens), list(side.offsets)) if side is not None else ([], [])
    ids = torch.tensor([list(tail) + list(tree.tokens) + side_tokens], dtype=torch.long, device=device)  # (1, R)
    hidden = base.embed_tokens(ids)  # (1, R, H)
    last = n_cached + len(tail) - 1
    positions = list(range(n_cached, n_cached + len(tail))) + [last + d for d in tree.depths + tuple(side_offsets)]
    position_ids = torch.tensor([positions], dtype=torch.long, device=device)  # (1, R)
    mask = tree_mask(tree, n_cached, len(tail), hidden.dtype, side).to(device)
    hidden = run_layers(base, base.layers, hidden, n_cached, cache, mask=mask, position_ids=position_ids)
    return base.norm(hidden)[0]  # (R, H)


def compact_cache(cache, keep: int, rows: list[int]) -> None:
    """Keep the first ``keep`` cached positions followed by the positions ``rows`` (ascending, each
    >= keep), in place; drop everything else (the nodes off the accepted path)."""
    for layer in cache.layers:
        if not getattr(layer, "is_initialized", True) or layer.keys is None:
            continue
        if rows:
            index = torch.tensor(rows, dtype=torch.long, device=layer.keys.device)
            layer.keys[:, :, keep:keep + len(rows)] = layer.keys[:, :, index]
            layer.values[:, :, keep:keep + len(rows)] = layer.values[:, :, index]
        layer.keys = layer.keys[:, :, : keep + len(rows)]
        layer.values = layer.values[:, :, : keep + len(rows)]


class TargetRows:
    """The target's distribution after the context (row 0) and after tree node i (row i + 1), computed
    from the final hidden states in batches: the LM head is the largest single product of a round, and it
    is bound by reading its weights, so one call costs about the same for 1 row as for 16. A tree of up to
    ``EAGER_ROWS`` rows is computed in one call before the walk (``all_if_small``); a larger one row by row
    as the walk visits it (at most depth + 1)."""

    EAGER_ROWS = 16

    def __init__(self, head: torch.nn.Module, hidden: torch.Tensor, sampling: SamplingConfig):
        self.head, self.hidden, self.sampling = head, hidden, sampling  # hidden: (1 + N, H)
        self._rows: dict[int, torch.Tensor] = {}

    def __len__(self) -> int:
        return self.hidden.shape[0]

    def __getitem__(self, row: int) -> torch.Tensor:
        return self.rows([row])[0]

    def rows(self, rows: list[int]) -> torch.Tensor:
        """(len(rows), V), the missing rows computed in one batch."""
        missing = sorted({r for r in rows if r not in self._rows})
        if missing:
            with torch.inference_mode():
                probs = distribution(self.head(self.hidden[missing]), self.sampling)  # (len(missing), V)
            self._rows.update(zip(missing, probs))
        return torch.stack([self._rows[r] for r in rows])

    def known(self) -> set[int]:
        return set(self._rows)

    def all_if_small(self, extra: torch.Tensor | None = None) -> torch.Tensor | None:
        """Every row in one LM-head call when the tree is small (instead of one call per row walked);
        ``extra`` hidden rows (E, H) ride along in the same call and come back as logits (E, V)."""
        n_extra = 0 if extra is None else extra.shape[0]
        if len(self) + n_extra > self.EAGER_ROWS:
            return None
        with torch.inference_mode():
            logits = self.head(self.hidden if extra is None else torch.cat([self.hidden, extra]))  # (N + E, V)
            self._rows.update(enumerate(distribution(logits[: len(self)], self.sampling)))
        return None if extra is None else logits[len(self):]


def walk(tree, p, sampling: SamplingConfig, generator) -> tuple[list[int], int]:
    """The accepted path and the target's own next token. ``tree``: anything with ``tokens`` and
    ``children(node)``; ``p`` (1 + N, V; a tensor or ``TargetRows``): the target's distribution after the
    context (row 0) and after each node (row i + 1).

    From the context, take the target's token (its argmax, or a draw from its warped distribution); while
    that token is a child of the current node, move there and take the next one. Greedy, this is the
    longest path matching the target's greedy continuation. Sampling, every emitted token is a draw from
    the target's distribution given everything before it — the tree only decides how many of those draws
    one forward pays for — so the output is distributed exactly as the target's own sampling (lossless
    in distribution; with the same seed the draws differ from ``ar``'s)."""
    path, node = [], -1
    while True:
        token = choose(p[node + 1], sampling, generator)
        child = next((c for c in tree.children(node) if tree.tokens[c] == token), None)
        if child is None:
            return path, token
        path.append(child)
        node = child


def priced_size(probs: list[float], cost: list[float], draft_cost: float = 0.0) -> int:
    """How many of a tree's nodes to verify, its nodes ordered so that any first n form a tree (a parent
    before its children) with ``probs[i]`` each one's chance that the target reaches it: the n where a
    round's expected tokens, 1 + Σ probs[:n] (the target's own token plus the nodes'), per its cost,
    ``draft_cost`` + T(1 + n)/T(1) (``cost[n]``: this machine's measured verification of 1 + n tokens over one),
    is highest — Leviathan et al.'s Theorem 3.8 trade-off for a tree."""
    best, best_n, expected = 1.0 / (draft_cost + cost[0]), 0, 1.0
    for n, prob in enumerate(probs[: len(cost) - 1], 1):
        expected += prob
        if expected / (draft_cost + cost[n]) > best:
            best, best_n = expected / (draft_cost + cost[n]), n
    return best_n


# -- one round of a tree draft: verify, accept, commit, record ------------------------------------------------


@dataclass
class TreeRound:
    """What one verification of a tree gave: the final normed states of its input positions (R, H; the
    features a feature-level draft reads), the target's rows, the accepted path (node indices), the
    round's emitted tokens (the accepted nodes' and the target's own, cut at the end of the text) and the
    side rows' logits."""

    hidden: torch.Tensor
    p: TargetRows
    n_tail: int
    path: list[int] = None
    emitted: list[int] = None
    n_accepted: int = 0
    side_logits: torch.Tensor | None = None  # (read, V): the target's logits at the side rows read


def verify_tree(model: torch.nn.Module, lm_head: torch.nn.Module, cache, n_cached: int, context: list[int],
                tree: TokenTree, sampling: SamplingConfig, side: SideRows | None = None) -> TreeRound:
    """One target forward over [the context not cached yet | tree | side rows] and the target's rows after
    the context and after each node (the LM head over up to 16 rows in one call; the side rows' logits,
    ``TreeRound.side_logits``, of the last ``side.read`` of them, in the same call when they fit)."""
    tail = context[n_cached:]
    with torch.inference_mode():
        hidden = tree_forward(model, cache, tail, tree, n_cached, side)  # (R, H)
        n_side = side.n_rows if side is not None else 0
        rows = hidden[len(tail) - 1: hidden.shape[0] - n_side]  # (1 + N, H)
        p = TargetRows(lm_head, rows, sampling)
        read = (side.read or n_side) if n_side else 0
        side_hidden = hidden[hidden.shape[0] - read:] if n_side else None  # (read, H)
        side_logits = p.all_if_small(side_hidden)
        if n_side and side_logits is None:
            side_logits = lm_head(side_hidden)  # (read, V)
    return TreeRound(hidden, p, len(tail), side_logits=side_logits)


def accept_tree(verified: TreeRound, tree: TokenTree, cache, round: Round, sampling: SamplingConfig,
                generator) -> int:
    """Walk the tree (``walk``), cut the round at the end of the text, move the accepted nodes' keys and
    values into place and commit; the context length before the round's tokens."""
    context = round.context
    with torch.inference_mode():
        path, token = walk(tree, verified.p, sampling, generator)
        verified.emitted, verified.n_accepted = round.until_end([tree.tokens[i] for i in path] + [token], len(path))
        verified.path = path
        compact_cache(cache, len(context), [len(context) + i for i in path])
    return round.commit(verified.emitted)


def tree_round_record(index: int, context_len: int, tree: TokenTree, q: list[float], verified: TreeRound,
                      timing: Timing, *, kind: str, top_k: int, detail: dict, draft_forwards: int) -> RoundTrace:
    """A tree round as plain data (off the timed path): ``q[i]`` is the draft's probability for node i;
    ``tree`` in the trace's public shape (``RoundTrace.tree``, BiTA's without mask tokens). ``drafted`` is
    the path the target followed — the accepted nodes, then, where it stopped at a node with children,
    the chain of most probable children below (what a chain draft would have proposed)."""
    path, emitted, n_accepted, p = verified.path, verified.emitted, verified.n_accepted, verified.p
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
    known, on_path = p.known(), set(path)
    nodes = [{"token": t, "parent": par, "depth": d, "rank": tree.children(par).index(i), "accepted": i in on_path,
              "q": min(1.0, q[i]), "p": float(p[par + 1][t]) if par + 1 in known else None}
             for i, (t, par, d) in enumerate(zip(tree.tokens, tree.parents, tree.depths))]
    tree_data = {
        "kind": kind, "masks": 0, "top_k": top_k, "prompt_tokens": 0, "context_inputs": verified.n_tail,
        "nodes": nodes,
        "positions": [{"kind": "node", "node": i, "slot": 0, "offset": d} for i, d in enumerate(tree.depths)],
        "attention": ["".join("1" if v else "0" for v in row) for row in tree.visible().tolist()],
        "sees_prompt": [False] * tree.n_nodes, "accepted_path": list(path), "next_group": None,
    }
    return RoundTrace(
        index=index, context_len=context_len, drafted=tuple(drafted),
        q_drafted=tuple(min(1.0, q[i]) for i in drafted_nodes),
        p_drafted=tuple(float(target[j][t]) for j, t in enumerate(drafted)), n_accepted=n_accepted,
        emitted=tuple(emitted), emitted_kind=tuple(kinds),
        p_emitted=tuple(float(target[j][t]) for j, t in enumerate(emitted)),
        event=event, timing=timing, rejected_at=len(path) if event == "rejected" else None,
        draft_top=tuple(tuple((tree.tokens[s], min(1.0, q[s])) for s in tree.children(tree.parents[i]))
                        for i in drafted_nodes),
        target_top=top_pairs(torch.topk(target, min(TOP_ALTERNATIVES, target.shape[-1]), dim=-1)),
        draft_forwards=draft_forwards, target_forwards=1, detail=detail, tree=tree_data,
    )

