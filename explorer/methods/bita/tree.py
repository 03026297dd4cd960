"""BiTA decoding (Lin et al. 2024, section 3.2): generation and verification in one forward pass.

Mask tokens placed after a token predict the tokens beyond the target's own next one (semi-autoregressive
drafts); the next pass verifies those drafts as a token tree while, in the same pass, a group of mask
tokens attached to every tree node drafts for the round after. One round:

    1. draft   — the tree from the previous pass's mask predictions (top-k candidates per mask position)
    2. verify  — one target forward over [pending token | tree nodes | mask groups] with a 4D additive
                 attention mask and explicit position ids (the tree attention of Figure 6)
    3. accept  — walk down from the context following the target's own token while it is a child: the
                 longest matching path (greedy), or a draw from the target at each node (sampling)
    4. commit  — the accepted nodes' keys and values are compacted into place, the rest is dropped; the
                 mask group after the last accepted token gives the next round's candidates

Tree kinds (Table 4): ``straightforward`` (Figure 4: a chain of top-1 drafts and one mask group after the
context that does not see them; after c accepted drafts only masks c+1..M still draft), ``efficient``
(Figure 5: top-k candidates per mask position, only the top-1 node expanded, a mask group on every node
and on the context) and ``full`` (every candidate expanded, k + k² + … + k^M nodes, a group on each).

What keeps it lossless: the prompt tokens sit in the KV cache in front of the context, and only mask
tokens attend to them (Figure 3); the pending token and the tree nodes see exactly the context and their
own ancestors, so the target's logits at each node are the ones sequential decoding would compute there.

The flattened input, in order: the context tokens not cached yet (the whole prompt in round 0, then the
one pending token: the previous round's correction or bonus, never run yet), the tree nodes (parents
before children) and then the mask groups (the context's group first, then one per node). The cache
always holds [prompt tokens | context except the pending token].

Shape legend: P prompt tokens, C cached context tokens, R new input positions (tail + nodes + masks),
N tree nodes, M mask tokens per group, k candidates per mask position, H hidden size, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterator

import torch

from ...engine.forward import fast_decoder, lm_head, run_layers
from ...engine.tree import TargetRows, TokenTree, compact_cache, walk  # the tree verification every tree draft shares
from ...engine.rounds import TOP_ALTERNATIVES, Round, run_rounds, top_pairs
from ...engine.sampling import Rng, SamplingConfig
from ...trace import RoundTrace, Timing
from ...errors import ExplorerError

TREE_KINDS = {
    "efficient": "top-k candidates per mask position, only the top-1 node expanded, a mask group on every node "
                 "(Figure 5)",
    "full": "every top-k candidate expanded (Table 4's fully tree-based ablation), a mask group on every node",
    "straightforward": "a chain of top-1 drafts and one mask group after the context that does not see them "
                       "(Figure 4)",
}
MAX_TOP_K = 10
MAX_TREE_INPUT = 1024  # tree nodes + mask tokens in one forward


@dataclass(frozen=True)
class BitaConfig:
    """The tree kind, M mask tokens per group and k candidates per mask position."""

    tree: str
    masks: int
    top_k: int

    def __post_init__(self):
        if self.tree not in TREE_KINDS:
            raise ExplorerError(f"unknown BiTA tree {self.tree!r}: use one of {', '.join(TREE_KINDS)}")
        if not (isinstance(self.masks, int) and not isinstance(self.masks, bool) and 1 <= self.masks <= 8):
            raise ExplorerError(f"the BiTA mask count must be a whole number from 1 to 8, got {self.masks!r}")
        if not (isinstance(self.top_k, int) and not isinstance(self.top_k, bool) and 1 <= self.top_k <= MAX_TOP_K):
            raise ExplorerError(f"the BiTA top-k must be a whole number from 1 to {MAX_TOP_K}, got {self.top_k!r}")
        if self.input_size > MAX_TREE_INPUT:
            raise ExplorerError(f"a {self.tree} tree with {self.masks} masks and top-{self.top_k} needs "
                                f"{self.input_size} input positions per forward (at most {MAX_TREE_INPUT}): "
                                "use fewer masks, a smaller top-k or the efficient tree")

    @property
    def k(self) -> int:
        """Candidates per mask position actually used (the straightforward chain takes the top-1)."""
        return 1 if self.tree == "straightforward" else self.top_k

    @property
    def input_size(self) -> int:
        """Tree nodes + mask tokens of a full-depth tree."""
        m, k = self.masks, self.k
        if self.tree == "straightforward":
            return 2 * m
        nodes = m * k if self.tree == "efficient" else sum(k ** d for d in range(1, m + 1))
        return nodes + (nodes + 1) * m


@dataclass(frozen=True)
class Layout(TokenTree):
    """A token tree (``engine.tree.TokenTree``: tokens, parents, depths, q — each node's mask probability)
    and its mask groups, flattened into one forward's input (section 3.2, Figure 6): ``ranks[i]`` is node
    i's place in its mask's top-k; ``groups`` lists the owners of the mask groups in input order (-1: the
    context); ``masks`` the mask tokens per group."""

    ranks: tuple[int, ...] = ()
    groups: tuple[int, ...] = ()
    masks: int = 0

    @cached_property
    def positions(self) -> tuple[tuple[str, int, int], ...]:
        """(kind, node, slot) per input position after the context: nodes (slot 0), then mask slots 1..M."""
        nodes = tuple(("node", i, 0) for i in range(self.n_nodes))
        masks = tuple(("mask", owner, j) for owner in self.groups for j in range(1, self.masks + 1))
        return nodes + masks

    def group_start(self, owner: int) -> int:
        """Index (among ``positions``) of the first mask of ``owner``'s group."""
        return self.n_nodes + self.groups.index(owner) * self.masks

    def offsets(self) -> list[int]:
        """Position id of each position minus that of the last context token: a node's depth; mask j of
        a group on a node at depth d sits at d + j (the place of the token it stands in for)."""
        return [self.depths[n] if kind == "node" else (self.depths[n] if n >= 0 else 0) + j
                for kind, n, j in self.positions]

    def visible(self) -> torch.Tensor:
        """(T, T) bool among ``positions``: a node sees its ancestors and itself; a mask sees its owner's
        ancestors, its owner and the earlier masks of its own group (Figures 3 and 6)."""
        t = len(self.positions)
        seen = torch.zeros(t, t, dtype=torch.bool)  # (T, T)
        for row, (kind, n, j) in enumerate(self.positions):
            seen[row, self.path_to(n)] = True
            if kind == "mask":
                start = self.group_start(n)
                seen[row, start:start + j] = True
        return seen

    def sees_prompt(self) -> list[bool]:
        return [kind == "mask" for kind, _, _ in self.positions]


def build_tree(cfg: BitaConfig, candidates: list[list[tuple[int, float]]], max_depth: int) -> Layout:
    """The round's tree from ``candidates`` (per depth, the chosen mask's top-k as (token, q), best
    first), at most ``max_depth`` deep (the tokens still allowed, less the target's own one)."""
    levels = candidates[: max(0, max_depth)]
    tokens, parents, depths, ranks, q = [], [], [], [], []

    def add(token, parent, depth, rank, prob) -> int:
        tokens.append(int(token)), parents.append(parent), depths.append(depth), ranks.append(rank), q.append(float(prob))
        return len(tokens) - 1

    frontier = [-1]
    for depth, cands in enumerate(levels, 1):
        if cfg.tree == "full":
            frontier = [add(t, parent, depth, r, p) for parent in frontier for r, (t, p) in enumerate(cands[: cfg.k])]
        else:  # efficient / straightforward: only the top-1 node has children
            first = None
            for r, (t, p) in enumerate(cands[: cfg.k]):
                node = add(t, frontier[0], depth, r, p)
                first = node if first is None else first
            frontier = [first]
    groups = (-1,) if cfg.tree == "straightforward" else (-1, *range(len(tokens)))
    return Layout(tokens=tuple(tokens), parents=tuple(parents), depths=tuple(depths), q=tuple(q), ranks=tuple(ranks),
                  groups=groups, masks=cfg.masks)


def attention_allowed(layout: Layout, n_prompt: int, n_cached: int, n_tail: int) -> torch.Tensor:
    """(R, P + C + R) bool: row r may attend column c. Columns: [prompt tokens | cached context | this
    forward's inputs]; rows: this forward's inputs [context tail | nodes | masks]. Context and nodes never
    see the prompt tokens; masks do (Figure 3)."""
    t = len(layout.positions)
    r, past = n_tail + t, n_prompt + n_cached
    allowed = torch.zeros(r, past + r, dtype=torch.bool)  # (R, P + C + R)
    allowed[:, n_prompt:past] = True  # every input sees the cached context
    allowed[:n_tail, past:past + n_tail] = torch.ones(n_tail, n_tail, dtype=torch.bool).tril()  # causal tail
    allowed[n_tail:, past:past + n_tail] = True  # the tree hangs below the last context token
    allowed[n_tail:, past + n_tail:] = layout.visible()
    allowed[n_tail:, :n_prompt] = torch.tensor(layout.sees_prompt(), dtype=torch.bool)[:, None]
    return allowed


def position_ids(layout: Layout, n_cached: int, n_tail: int) -> list[int]:
    """Explicit position ids: the tail continues the cached context, the tree hangs at depth offsets
    below the last context token (the prompt tokens have no position: their keys are stored rotated)."""
    last = n_cached + n_tail - 1
    return list(range(n_cached, n_cached + n_tail)) + [last + o for o in layout.offsets()]


def tree_forward(model: torch.nn.Module, masks: torch.Tensor, cache, tail: list[int], layout: Layout,
                 n_prompt: int, n_cached: int) -> torch.Tensor:
    """One target forward over [tail | nodes | mask groups]; returns the final hidden states (R, H)
    (normed; the LM head runs only on the rows that are needed). ``masks`` (M, H) are the mask embeddings."""
    base = fast_decoder(model)
    device = masks.device
    n_masks = len(layout.positions) - layout.n_nodes
    ids = torch.tensor(list(tail) + list(layout.tokens), dtype=torch.long, device=device)  # (R - masks,)
    embeds = torch.cat([base.embed_tokens(ids), masks.repeat(len(layout.groups), 1)[:n_masks]])[None]  # (1, R, H)
    allowed = attention_allowed(layout, n_prompt, n_cached, len(tail)).to(device)
    additive = torch.zeros(allowed.shape, dtype=embeds.dtype, device=device)
    additive = additive.masked_fill(~allowed, torch.finfo(embeds.dtype).min)[None, None]  # (1, 1, R, P + C + R)
    pos = torch.tensor([position_ids(layout, n_cached, len(tail))], dtype=torch.long, device=device)  # (1, R)
    hidden = run_layers(base, base.layers, embeds, cache.get_seq_length(), cache, mask=additive, position_ids=pos)
    return base.norm(hidden)[0]  # (R, H); run_layers: a GPU replays one graph per row count (engine.cuda_graphs)


def bita_rounds(target, tokens, cfg: BitaConfig, sampling: SamplingConfig, prompt_ids: list[int],
                max_new_tokens: int, rng: Rng) -> Iterator[tuple[RoundTrace, float]]:
    """Yield (round, seconds spent recording it) until ``max_new_tokens`` or an end-of-sequence token.

    ``tokens`` is a ``BitaTokens`` (prompt keys/values and at least ``cfg.masks`` mask embeddings)."""
    if tokens.n_masks < cfg.masks:
        raise ExplorerError(f"the BiTA tokens have {tokens.n_masks} mask tokens; {cfg.masks} were asked for")
    step = BitaStep(target, tokens, cfg, sampling, rng)
    return run_rounds(target.device, target.eos_token_ids, step, prompt_ids, max_new_tokens)


class BitaStep:
    """One BiTA round (draft tree from the last pass's masks, one forward that verifies it and drafts the
    next, the walk, the cache compaction) on the round driver."""

    def __init__(self, target, tokens, cfg: BitaConfig, sampling: SamplingConfig, rng: Rng):
        self.model, self.head = target.model, lm_head(target.model)
        self.tokens, self.cfg, self.sampling = tokens, cfg, sampling
        self.masks = tokens.masks[: cfg.masks]
        self.cache = tokens.prompt_cache()
        self.cached = 0  # context tokens whose keys and values are in the cache (after the prompt tokens)
        self.candidates: list[list[tuple[int, float]]] = []  # per depth, the chosen mask group's top-k
        self.generator = rng.on(target.device)

    def __call__(self, round: Round):
        cfg, clock, context, head, n_prompt = self.cfg, round.clock, round.context, self.head, self.tokens.n_prompt
        # 1. draft: last pass's mask predictions as a tree (room for the target's own token)
        layout = build_tree(cfg, self.candidates, round.budget - 1)
        tail = context[self.cached:]
        drafted_at = clock()

        # 2. verify and generate: one forward over the context tail, the tree and the mask groups
        with torch.inference_mode():
            hidden = tree_forward(self.model, self.masks, self.cache, tail, layout, n_prompt, self.cached)  # (R, H)
        p = TargetRows(head, hidden[len(tail) - 1: len(tail) + layout.n_nodes], self.sampling)
        # the chain's next candidates come from its one mask group, known before the walk: same head call
        chain_masks = hidden[len(tail) + layout.group_start(-1):][: cfg.masks] if cfg.tree == "straightforward" else None
        mask_logits = p.all_if_small(chain_masks)  # (M, V) for the chain, else None
        verified_at = clock()

        # 3. accept: follow the target's token down the tree while it is a child of the current node
        #    (the LM head runs only on the rows the walk visits)
        with torch.inference_mode():
            path, token = walk(layout, p, self.sampling, self.generator)
        node = path[-1] if path else -1
        emitted, n_accepted = round.until_end([layout.tokens[i] for i in path] + [token], len(path))
        finished = len(emitted) == round.budget or emitted[-1] in round.eos

        # 4. commit: the accepted nodes' keys and values move into place, the rest is dropped
        keep = n_prompt + len(context)  # prompt tokens + the whole context (the tail was just run)
        with torch.inference_mode():
            compact_cache(self.cache, keep, [keep + i for i in path])
        self.cached = len(context) + len(path)
        context_len = round.commit(emitted)
        accepted_at = clock()

        # next round's candidates: the mask group that follows the last accepted token
        owner, first_slot = (-1, len(path)) if cfg.tree == "straightforward" else (node, 0)
        if not finished and first_slot < cfg.masks:
            start_row = len(tail) + layout.group_start(owner)
            with torch.inference_mode():
                logits = mask_logits[first_slot:] if mask_logits is not None else \
                    head(hidden[start_row + first_slot: start_row + cfg.masks])
                q = logits.float().softmax(dim=-1)  # (M', V)
                top = torch.topk(q, cfg.k, dim=-1)
            self.candidates = [list(zip(ids, probs)) for ids, probs in zip(top.indices.tolist(), top.values.tolist())]
        else:
            self.candidates = []
        done_at = clock()
        timing = Timing(drafted_at - round.start + done_at - accepted_at, verified_at - drafted_at,
                        accepted_at - verified_at)
        return lambda: _record(round.index, context_len, layout, path, node, emitted, n_accepted, p, len(tail),
                               n_prompt, owner, cfg, self.tokens.name, timing)


def tree_record(layout: Layout, path: list[int], p: TargetRows, n_prompt: int, n_tail: int, owner: int,
                cfg: BitaConfig) -> dict:
    """The round's ``tree`` as plain data (the trace's public contract, see ``RoundTrace.tree``)."""
    on_path = set(path)
    known = p.known()  # the target's probability of a node's token, where its parent's row was computed
    p_nodes = [float(p[par + 1][t]) if par + 1 in known else None for t, par in zip(layout.tokens, layout.parents)]
    visible = layout.visible()
    return {
        "kind": cfg.tree, "masks": cfg.masks, "top_k": cfg.k, "prompt_tokens": n_prompt, "context_inputs": n_tail,
        "nodes": [{"token": t, "parent": par, "depth": d, "rank": r, "accepted": i in on_path, "q": q, "p": pn}
                  for i, (t, par, d, r, q, pn) in enumerate(zip(layout.tokens, layout.parents, layout.depths,
                                                                  layout.ranks, layout.q, p_nodes))],
        "positions": [{"kind": kind, "node": n, "slot": j, "offset": o}
                      for (kind, n, j), o in zip(layout.positions, layout.offsets())],
        "attention": ["".join("1" if v else "0" for v in row) for row in visible.tolist()],
        "sees_prompt": layout.sees_prompt(),
        "accepted_path": list(path),
        "next_group": owner,
    }


def _record(index, context_len, layout: Layout, path, node, emitted, n_accepted, p: TargetRows, n_tail, n_prompt, owner,
            cfg: BitaConfig, tokens_name: str, timing: Timing) -> RoundTrace:
    """Plain-data record of one round (off the timed path). ``drafted`` is the tree's path the target
    followed: the accepted nodes, then (where it stopped at a node with children) the top-1 chain below."""
    drafted_nodes = list(path)
    tip = node
    while layout.children(tip):
        tip = layout.children(tip)[0]
        drafted_nodes.append(tip)
    rejected = bool(layout.children(node))
    drafted = [layout.tokens[i] for i in drafted_nodes]
    target = p.rows([0] + [i + 1 for i in drafted_nodes])  # (K + 1, V): after the context, after each draft
    p_drafted = [float(target[j][t]) for j, t in enumerate(drafted)]
    p_emitted = [float(target[j][t]) for j, t in enumerate(emitted)]  # emitted j follows drafted[:j]
    kinds = ["accepted"] * n_accepted
    if len(emitted) > n_accepted:
        kinds.append("target" if not layout.n_nodes else ("corrected" if rejected else "bonus"))
    if not layout.n_nodes:
        event = "no-draft"
    else:
        event = "rejected" if rejected else "all-accepted"
    draft_top = tuple(tuple((layout.tokens[s], layout.q[s]) for s in layout.children(layout.parents[i]))
                      for i in drafted_nodes)
    return RoundTrace(
        index=index, context_len=context_len, drafted=tuple(drafted), q_drafted=tuple(layout.q[i] for i in drafted_nodes),
        p_drafted=tuple(p_drafted), n_accepted=n_accepted, emitted=tuple(emitted), emitted_kind=tuple(kinds),
        p_emitted=tuple(p_emitted), event=event, timing=timing,
        rejected_at=len(path) if event == "rejected" else None, draft_top=draft_top,
        target_top=top_pairs(torch.topk(target, min(TOP_ALTERNATIVES, target.shape[-1]), dim=-1)),
        draft_forwards=0, target_forwards=1,
        detail={"tree": cfg.tree, "masks": cfg.masks, "top_k": cfg.k, "tokens": tokens_name,
                "input_positions": n_tail + len(layout.positions), "nodes": layout.n_nodes},
        tree=tree_record(layout, path, p, n_prompt, n_tail, owner, cfg),
    )
