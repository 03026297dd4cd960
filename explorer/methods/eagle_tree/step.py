"""One EAGLE-2 round (Li et al., EMNLP 2024, arXiv 2406.16858, section 4) on the round driver:

    1. catch up   — the feature head runs over the positions committed since the last round, from the
                    target's own features (``methods/eagle``'s head: (f_j, x_{j+1}) -> f̂_{j+1}); its last
                    output f̂_n predicts the pending token's feature, whose LM-head row gives the first layer
    2. expand     — depth by depth, the ``top_k`` nodes of the newest layer with the highest *value* (the
                    product of the head's confidences along the path: the estimated chance that the target
                    accepts the node, section 4.2) each run one head step in one batched forward under tree
                    attention over the head's cache, and each gives its ``top_k`` likeliest tokens as children
    3. rerank     — of every node made, the ``tokens`` with the highest value form the draft tree (section
                    4.3; a parent's value is at least its child's, so the chosen nodes form a tree), cut where
                    expected tokens per verification cost peak at this machine's T(n) (``size`` priced)
    4. verify     — one target forward over [pending token | tree] with tree attention (``engine.tree``); the
                    walk keeps the longest path the target's own tokens follow (sampling: a draw from the
                    target at every node — lossless in distribution)
    5. commit     — the accepted nodes' keys and values move into place; their features (the forward's final
                    normed states) are what the next round's head reads

Positions: the target's cache holds the committed context except its pending token x_n; the features
f_0 … f_{n−1} are known. A node at depth d is the candidate for x_{n+d}; its head row sits at position
n + d − 1 and reads (its parent's f̂, its token).

Shape legend: N tree nodes, E expanded nodes (head rows beyond the true positions), k top-k, H hidden, V' the
head's scored rows.
"""

from __future__ import annotations

import torch

from ...engine.cache import common_prefix, crop_cache, new_cache
from ...engine.costs import verify_cost_curve
from ...engine.fast import fast_linear, fast_view
from ...engine.forward import fast_decoder, lm_head, run_layers
from ...engine.rounds import Round
from ...engine.sampling import SamplingConfig
from ...engine.tree import TokenTree, accept_tree, priced_size, tree_round_record, verify_tree
from ...trace import Timing
from ..eagle.head import FeatureHead


class Candidates:
    """Every node the expansion made: token, parent (-1: the context), depth, the head's confidence in it
    and its value (the product of confidences down its path), in the order made (parents first)."""

    def __init__(self):
        self.tokens: list[int] = []
        self.parents: list[int] = []
        self.depths: list[int] = []
        self.confidence: list[float] = []
        self.value: list[float] = []

    def add(self, token: int, parent: int, confidence: float) -> int:
        self.tokens.append(token)
        self.parents.append(parent)
        self.depths.append(1 if parent < 0 else self.depths[parent] + 1)
        self.confidence.append(confidence)
        self.value.append(confidence * (1.0 if parent < 0 else self.value[parent]))
        return len(self.tokens) - 1

    def reranked(self, most: int) -> list[int]:
        """The ``most`` nodes of highest value, parents before children (ties: the earlier made)."""
        order = sorted(range(len(self.tokens)), key=lambda i: (-self.value[i], i))[:most]
        chosen = set(order)
        return [i for i in order if self.parents[i] < 0 or self.parents[i] in chosen]


class EagleTreeStep:
    """The round step: the head drafts a tree, the target verifies it, the accepted path is kept."""

    def __init__(self, target, head: FeatureHead, options, sampling: SamplingConfig, rng):
        self.model, self.lm = target.model, lm_head(target.model)
        self.base = fast_decoder(target.model)
        self.head, self.view = head, fast_view(head, like=target.model)
        weight = target.model.get_output_embeddings().weight
        self.vocab = head.vocab  # (V',) ids the head scores, None = all
        self.rows = self.lm if head.vocab is None else fast_linear(weight[head.vocab].detach().clone(), target.model)
        self.options, self.sampling = options, sampling
        self.generator = rng.on(target.device)
        self.device = target.device
        self.cache, self.cached = new_cache(), 0  # the target's: positions 0 … cached − 1
        self.features: torch.Tensor | None = None  # (cached, H): the target's f_j at each cached position
        self.head_cache, self.head_cached = new_cache(), 0  # the head's positions computed from true features
        self.head_ids: list[int] = []
        curve = verify_cost_curve(target, max_tokens=options.tokens + 1) if options.size == "priced" else None
        self.cost = None if curve is None else [t / curve[0] for t in curve]  # T(1 + n)/T(1)
        self.t1 = None if curve is None else curve[0]

    # -- 1–3: the draft tree -------------------------------------------------------------------------------

    def draft(self, context: list[int], room: int, spent) -> tuple[TokenTree, Candidates, list[int], int]:
        """The tree, every candidate made, the chosen candidates (tree order) and the head forwards run;
        ``spent()``: the round's seconds so far (the drafting a priced cut adds to the verification's cost)."""
        n = len(context) - 1
        made = Candidates()
        if n < 1 or self.features is None or self.features.shape[0] < n or room < 1:
            return TokenTree.build([], []), made, [], 0  # the first round: no target features yet
        o = self.options
        with torch.inference_mode():
            feature = self._catch_up(context)  # f̂_n (1, H)
            forwards = 1
            layer = [made.add(t, -1, c) for t, c in self._top(feature)[0]]
            expanded: list[int] = []  # candidates whose head rows follow the true positions in the head's cache
            outputs: dict[int, torch.Tensor] = {}  # expanded candidate -> its head row's f̂ (what its children read)
            for depth in range(1, o.depth):
                chosen = sorted(layer, key=lambda i: -made.value[i])[: o.top_k]
                if not chosen:
                    break
                parents_rows = [feature[0] if made.parents[i] < 0 else outputs[made.parents[i]] for i in chosen]
                out = self._expand(made, chosen, torch.stack(parents_rows), expanded, n)  # (k, H)
                forwards += 1
                expanded.extend(chosen)
                outputs.update(zip(chosen, out))
                layer = [made.add(t, parent, c) for parent, children in zip(chosen, self._top(out))
                         for t, c in children]
            crop_cache(self.head_cache, self.head_cached)
        order = made.reranked(min(o.tokens, room))
        if self.cost is not None:  # the drafting already spent counts against the nodes verified
            order = order[: priced_size([made.value[i] for i in order], self.cost, spent() / self.t1)]
        index = {c: j for j, c in enumerate(order)}
        tree = TokenTree.build([made.tokens[c] for c in order], [index.get(made.parents[c], -1) for c in order],
                               [made.value[c] for c in order])
        return tree, made, order, forwards

    def _catch_up(self, context: list[int]) -> torch.Tensor:
        """The head over positions head_cached … n − 1 from the target's features; f̂_n (1, H)."""
        n = len(context) - 1
        keep = min(self.head_cached, common_prefix(self.head_ids, context) - 1, n - 1)
        if keep < self.head_cached:
            crop_cache(self.head_cache, max(keep, 0))
        start = max(keep, 0)
        new = torch.tensor([context[start + 1: n + 1]], dtype=torch.long, device=self.device)  # (1, T)
        x = self.view.inputs(self.base.embed_tokens(new), self.features[None, start:n])  # (1, T, H)
        out = self.view.norm(run_layers(self.base, self.view.layers, x, start, self.head_cache))
        self.head_cached, self.head_ids = n, list(context[: n + 1])
        return out[0, -1:]

    def _expand(self, made: Candidates, chosen: list[int], parent_features: torch.Tensor, expanded: list[int],
                n: int) -> torch.Tensor:
        """One batched head step for the ``chosen`` nodes under tree attention: each row sees the true
        positions and the head rows of its own ancestors; (k, H) f̂ out."""
        k, e = len(chosen), len(expanded)
        ids = torch.tensor([[made.tokens[i] for i in chosen]], dtype=torch.long, device=self.device)  # (1, k)
        x = self.view.inputs(self.base.embed_tokens(ids), parent_features[None])  # (1, k, H)
        at = {node: j for j, node in enumerate(expanded)}
        allowed = torch.zeros(k, n + e + k, dtype=torch.bool)  # (k, n + E + k)
        allowed[:, :n] = True
        for row, node in enumerate(chosen):
            allowed[row, n + e + row] = True
            parent = made.parents[node]
            while parent >= 0:
                allowed[row, n + at[parent]] = True
                parent = made.parents[parent]
        dtype = x.dtype
        mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
        positions = torch.tensor([[n + made.depths[i] - 1 for i in chosen]], dtype=torch.long, device=self.device)
        out = run_layers(self.base, self.view.layers, x, n + e, self.head_cache, mask=mask[None, None].to(self.device),
                         position_ids=positions)
        return self.view.norm(out)[0]

    def _top(self, features: torch.Tensor) -> list[list[tuple[int, float]]]:
        """For each row of f̂ (R, H): the head's ``top_k`` tokens and its confidence in each (softmax)."""
        probs = torch.softmax(self.rows(features).float(), dim=-1)  # (R, V')
        conf, where = torch.topk(probs, min(self.options.top_k, probs.shape[-1]), dim=-1)
        tokens = where if self.vocab is None else self.vocab[where]
        return [list(zip(t.tolist(), c.tolist())) for t, c in zip(tokens, conf)]

    # -- 4–5: verify and commit --------------------------------------------------------------------------

    def __call__(self, round: Round):
        clock, context = round.clock, round.context
        tree, made, order, forwards = self.draft(context, round.budget - 1, lambda: clock() - round.start)
        drafted_at = clock()
        verified = verify_tree(self.model, self.lm, self.cache, self.cached, context, tree, self.sampling)
        verified_at = clock()
        context_len = accept_tree(verified, tree, self.cache, round, self.sampling, self.generator)
        with torch.inference_mode():  # the target's features of the tail and the accepted nodes: the head reads them
            rows = list(range(verified.n_tail)) + [verified.n_tail + i for i in verified.path]
            known = verified.hidden[rows]
            self.features = known if self.features is None or self.cached == 0 else \
                torch.cat([self.features[: self.cached], known])
        self.cached = context_len + len(verified.path)
        timing = Timing(drafted_at - round.start, verified_at - drafted_at, clock() - verified_at)
        confidence = [made.confidence[c] for c in order]
        detail = {"candidates": len(made.tokens), "depth": max(made.depths, default=0), "head_forwards": forwards,
                  "nodes": tree.n_nodes, "value": [round_to(v) for v in tree.q], "expected": round_to(1.0 + sum(tree.q)),
                  "input_positions": verified.n_tail + tree.n_nodes}
        return lambda: tree_round_record(round.index, context_len, tree, confidence, verified, timing, kind="eagle",
                                         top_k=self.options.top_k, detail=detail, draft_forwards=forwards)


def round_to(x: float) -> float:
    """Four decimals (a trace keeps what a reader can use; ``round`` is the step's argument above)."""
    return round(float(x), 4)
