"""Log-probabilities for rows that share prefixes (the beams of a beam search) in one forward a call, of the
target or of a draft, through one KV cache that holds a trie of every token the rows passed through.

``KVPool`` runs a forward per row, each through its own cache: beam search at width k paid k forwards a step,
and more where a beam moved to a cache that held another one. Here every cached position is a node of a
trie: its token, its parent position and its depth (the position id the sequence gives it). A call runs the
rows' nodes that the trie lacks in one forward, each seeing its ancestors and itself (``engine.tree``'s tree
attention, over a cached trie instead of a cached chain), and keeps every node's final hidden state, so the
log-probabilities after any position cost one row of the LM head, however long ago the node was run.
Nodes on none of the latest call's rows are dropped when they outnumber the live ones (``compact_cache``).
A node's hidden state depends only on its path, so the trie never goes stale.

Shape legend: C cached positions, R new positions, H hidden size, V vocabulary.
"""

from __future__ import annotations

import torch

from ..errors import ExplorerError
from .cache import new_cache
from .forward import fast_decoder, full_forward, lm_head, run_layers
from .kv_pool import KVPool
from .tree import compact_cache

SLACK = 64  # dead positions tolerated beyond as many as are live before the cache is compacted


class TrieCache:
    """``logprobs(rows, n_logits)`` as ``KVPool`` answers it, one forward a call, through ``stages``: lists of a
    Llama-style decoder's layers run one after another, each over a cache of its own (a model: its layers; an
    early-exit draft: the target's first layers, then its exit layer), then ``finish`` (the final norm) on each
    new node, and ``head`` (states (n, H) -> logits (n, V)) on the positions asked for. Activations in ``dtype``
    (the embedding's by default; a low-bit copy's: bfloat16)."""

    def __init__(self, base, stages: list, finish, head, device: torch.device, dtype: torch.dtype | None = None):
        self.base, self.stages, self.finish, self.head, self.device = base, stages, finish, head, device
        self.dtype = dtype or base.embed_tokens.weight.dtype
        self.forwards = 0  # forwards run so far
        self._reset()

    @classmethod
    def of_model(cls, model: torch.nn.Module, device: torch.device) -> "TrieCache":
        """The whole causal LM (``fast_decoder`` refuses one that is not a Llama-style decoder)."""
        base = fast_decoder(model)
        return cls(base, [base.layers], base.norm, lm_head(model), device)

    def _reset(self) -> None:
        self.caches = [new_cache() for _ in self.stages]
        self.tokens: list[int] = []
        self.parents: list[int] = []  # -1: a child of the root (the empty sequence)
        self.depths: list[int] = []  # a node's index in its sequence: its position id
        self.children: dict[int, dict[int, int]] = {-1: {}}  # position -> {token: child position}
        size = self.base.embed_tokens.weight.shape[1]
        self.hidden = torch.empty(0, size, dtype=self.dtype, device=self.device)  # (C, H)

    def logprobs(self, rows: list[list[int]], n_logits: list[int]) -> list[torch.Tensor]:
        """For each row, (n, V) log-probabilities after each of its last n positions."""
        try:
            cached = len(self.tokens)
            paths = [self._walk(row) for row in rows]
            if len(self.tokens) > cached:
                self._run(cached)
            wanted = sorted({p for path, n in zip(paths, n_logits) for p in path[len(path) - n:]})
            with torch.inference_mode():
                found = self.head(self.hidden[wanted]).float().log_softmax(dim=-1)  # (len(wanted), V)
            at = {p: i for i, p in enumerate(wanted)}
            out = [found[[at[p] for p in path[len(path) - n:]]] for path, n in zip(paths, n_logits)]
            self._compact({p for path in paths for p in path})
            return out
        except BaseException:  # a half-added trie must not outlive a failed forward (or a stop inside it)
            self._reset()
            raise

    def _walk(self, row: list[int]) -> list[int]:
        """The positions of ``row``'s tokens, adding the nodes the trie lacks (run by ``_run``)."""
        path, node = [], -1
        for token in row:
            child = self.children[node].get(token)
            if child is None:
                child = len(self.tokens)
                self.tokens.append(token)
                self.parents.append(node)
                self.depths.append(self.depths[node] + 1 if node >= 0 else 0)
                self.children[node][token] = child
                self.children[child] = {}
            path.append(child)
            node = child
        return path

    def _run(self, cached: int) -> None:
        """One forward over the nodes from position ``cached`` on, each seeing its ancestors and itself."""
        new = len(self.tokens) - cached
        seen = torch.zeros(new, cached + new, dtype=torch.bool)  # (R, C + R)
        lines: dict[int, torch.Tensor] = {}  # a cached parent's line of ancestors, found once
        for j in range(new):
            parent = self.parents[cached + j]
            if parent >= cached:
                seen[j] = seen[parent - cached]
            elif parent >= 0:
                if parent not in lines:
                    lines[parent] = torch.tensor(self._line(parent), dtype=torch.long)
                seen[j, lines[parent]] = True
            seen[j, cached + j] = True
        mask = torch.zeros(seen.shape, dtype=self.dtype).masked_fill(~seen, torch.finfo(self.dtype).min)[None, None]
        ids = torch.tensor([self.tokens[cached:]], dtype=torch.long, device=self.device)  # (1, R)
        positions = torch.tensor([self.depths[cached:]], dtype=torch.long, device=self.device)  # (1, R)
        mask = mask.to(self.device)
        with torch.inference_mode():
            hidden = self.base.embed_tokens(ids).to(self.dtype)  # (1, R, H)
            for layers, cache in zip(self.stages, self.caches):
                hidden = run_layers(self.base, layers, hidden, cached, cache, mask=mask, position_ids=positions)
            self.hidden = torch.cat([self.hidden, self.finish(hidden[0])])
        self.forwards += 1

    def _line(self, node: int) -> list[int]:
        """``node`` and its ancestors' positions."""
        line = []
        while node >= 0:
            line.append(node)
            node = self.parents[node]
        return line

    def _compact(self, live: set[int]) -> None:
        """Drop the nodes off every live row when they outnumber the live ones (plus ``SLACK``)."""
        if len(self.tokens) <= 2 * len(live) + SLACK:
            return
        kept = sorted(live)  # ascending: a parent stays before its children
        keep = next((i for i, p in enumerate(kept) if p != i), len(kept))  # a leading run that stays in place
        with torch.inference_mode():  # the caches' tensors were made in it
            for cache in self.caches:
                compact_cache(cache, keep, kept[keep:])
        renumber = {-1: -1, **{old: new for new, old in enumerate(kept)}}
        self.tokens = [self.tokens[p] for p in kept]
        self.parents = [renumber[self.parents[p]] for p in kept]
        self.depths = [self.depths[p] for p in kept]
        self.children = {renumber[p]: {t: renumber[c] for t, c in kids.items() if c in renumber}
                         for p, kids in self.children.items() if p in renumber}
        self.hidden = self.hidden[kept]


def model_trie(model: torch.nn.Module, device: torch.device) -> TrieCache | None:
    """A ``TrieCache`` of the whole model, or None where it is not a Llama-style decoder."""
    try:
        return TrieCache.of_model(model, device)
    except ExplorerError:
        return None


def rows_scorer(model: torch.nn.Module, device: torch.device, pool_size: int):
    """A ``TrieCache`` for a Llama-style decoder; for any other model a ``KVPool`` of ``pool_size`` caches."""
    trie = model_trie(model, device)
    return trie if trie is not None else KVPool(full_forward(model), device, pool_size)  # a forward per row
