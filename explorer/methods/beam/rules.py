"""The two rules of speculative beam search, round by round (see the package's doc): ``exact``
(Leviathan et al. A.4) and ``004`` (the reproduction report's Algorithm 2)."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import torch

from ...engine.acceptance import greedy_accept
from ...engine.drafters import KEEP_DRAFTING
from ...engine.trie_cache import rows_scorer
from ...engine.sampling import SamplingConfig
from ...trace import Timing
from .. import Request
from .search import Node, TargetBeams

if TYPE_CHECKING:
    from . import BeamOptions

RULES = ("exact", "004")  # the two rules, by the names a run and the bench grammar use
MAX_WIDTH = 8  # beams: each adds its rows to a round's target forward and k forwards to each draft step
MAX_BEAM_GAMMA = 16  # draft steps per round: a round's record holds every beam of every step
GREEDY = SamplingConfig(0.0)


@dataclasses.dataclass
class RoundRecord:
    """What one round did, before the best beam is known (``BeamStep`` turns it into a RoundTrace)."""

    layers: list[list[Node]]
    kinds: list[str]  # per layer: accepted | corrected | bonus | target (no draft) | branch (004)
    levels: list[list[tuple[tuple[int, ...], float, float]]]  # the draft's beams after j steps: (ids, q, p)
    drafted_steps: int
    target_forwards: int
    draft_forwards: int
    timing: Timing


class SpeculativeBeams:
    """One run of beam search on the request's target with ``drafter``, round by round under the chosen rule."""

    def __init__(self, request: Request, options: BeamOptions, drafter, clock):
        target = request.target
        self.clock = clock  # the round driver's (synchronised on a GPU)
        self.options, self.drafter = options, drafter
        self.prompt = list(request.prompt_ids)
        self.gamma = min(request.settings.gamma, MAX_BEAM_GAMMA)
        self.k = options.width
        self.search = TargetBeams(self.k, set(target.eos_token_ids), request.settings.max_new_tokens)
        self.pool = rows_scorer(target.model, target.device, 2 * self.k)
        # the draft's k beams a step in one forward where it can (``Drafter.row_scorer``), else one by one
        self.draft_rows = drafter.row_scorer() if drafter.row_scorer is not None else None
        self.rounds: list[RoundRecord] = []
        self.rng = request.rng()

    def next_round(self) -> None:
        """One round of the search under the chosen rule, added to ``rounds``."""
        self.rounds.append(self._exact_round() if self.options.rule == "exact" else self._004_round())

    def _draft_steps(self) -> int:
        return max(0, min(self.gamma, self.search.max_new - self.search.length - 1))

    # -- Leviathan et al. A.4 --------------------------------------------------------------------------

    def _exact_round(self) -> RoundRecord:
        r = len(self.rounds)
        t0 = self.clock()
        draft_before = self._draft_forwards()
        depth = self._draft_steps()  # at most γ: the target adds one step more
        levels = self._draft_beam_search(depth)  # levels[j]: the draft's beams after j steps (ids, q of last)
        t1 = self.clock()
        # the target scores every draft beam's end: one row per beam that no deeper beam extends
        ends = {ids for level in levels for ids, _ in level}
        leaves = [ids for ids in ends if not any(len(o) > len(ids) and o[:len(ids)] == ids for o in ends)]
        start_len = self.search.length
        before = self.pool.forwards
        found = self.pool.logprobs([self.prompt + list(ids) for ids in leaves],
                                   [len(ids) - start_len + 1 for ids in leaves])  # from the start beam's end on
        after: dict[tuple[int, ...], torch.Tensor] = {}  # beam ids → the target's log-probs after it
        for ids, lp in zip(leaves, found):
            for j in range(len(ids) - start_len + 1):
                after.setdefault(ids[:start_len + j], lp[j])
        t2 = self.clock()
        drafts = [[(ids, q, math.exp(float(after[ids[:-1]][ids[-1]]))) for ids, q in level] for level in levels[1:]]
        layers, kinds = [], []
        for j in range(1, depth + 2):
            logprobs = torch.stack([after[b.ids] for b in self.search.running])
            layers.append(self.search.step(logprobs, (r, j - 1)))
            kept = {b.ids for b in self.search.running}
            same = j <= depth and kept == {ids for ids, _ in levels[j]} and len(kept) == len(levels[j])
            kinds.append("accepted" if same else "target" if depth == 0 else "bonus" if j == depth + 1 else "corrected")
            if self.search.done or not same:
                break
        t3 = self.clock()
        return RoundRecord(layers, kinds, drafts, depth, self.pool.forwards - before,
                           self._draft_forwards() - draft_before, Timing(t1 - t0, t2 - t1, t3 - t2))

    def _draft_beam_search(self, depth: int) -> list[list[tuple[tuple[int, ...], float]]]:
        """The draft's beam search at width k for ``depth`` steps from the target's running beams, scored
        from the target's running scores with the draft's log-probabilities (end-of-sequence candidates
        leave it: the target decides what finishes). Level j: [(beam ids, q of its last token)]."""
        runner, eos = self.drafter.runner, self.search.eos
        beams = [(b.ids, b.score, 1.0) for b in self.search.running]
        levels = [[(ids, q) for ids, _, q in beams]]
        for _ in range(depth):
            if self.draft_rows is not None:
                rows = [lp[0] for lp in self.draft_rows.logprobs([self.prompt + list(ids) for ids, _, _ in beams],
                                                                 [1] * len(beams))]
            else:
                rows = [runner.logits(self.prompt + list(ids), 1)[0].float().log_softmax(dim=-1)
                        for ids, _, _ in beams]
            scores = torch.tensor([s for _, s, _ in beams])[:, None] + torch.stack(rows)
            vocab = scores.shape[1]
            top, index = torch.topk(scores.flatten(), min((1 + len(eos)) * self.k, scores.numel()))
            nxt = []
            for s, i in zip(top.tolist(), index.tolist()):
                parent, token = divmod(i, vocab)
                if token in eos:
                    continue
                nxt.append((beams[parent][0] + (token,), s, math.exp(float(rows[parent][token]))))
                if len(nxt) == self.k:
                    break
            if not nxt:
                break
            beams = nxt
            levels.append([(ids, q) for ids, _, q in beams])
        return levels

    # -- the reproduction report's Algorithm 2 ----------------------------------------------------------

    def _004_round(self) -> RoundRecord:
        r = len(self.rounds)
        search, k = self.search, self.k
        t_start = self.clock()
        draft_before, before = self._draft_forwards(), self.pool.forwards
        candidates, chains = [], []
        depths = [max(0, min(self.gamma, search.max_new - len(beam.ids) - 1)) for beam in search.running]
        drafted = self._draft_chains(depths)  # per beam: (its tokens up to an end token, q of each)
        t1 = self.clock()
        draft_s = t1 - t_start
        rows = [self.prompt + list(beam.ids) + tokens for beam, (tokens, _) in zip(search.running, drafted)]
        found = self.pool.logprobs(rows, [len(tokens) + 1 for tokens, _ in drafted])  # (n+1, V) each, one forward
        verify_s = self.clock() - t1
        for parent, (beam, (tokens, q), lp) in enumerate(zip(search.running, drafted, found)):
            n = greedy_accept(lp.argmax(dim=-1).tolist(), tokens).n_accepted  # speculative sampling, greedy
            p = [math.exp(float(lp[i, t])) for i, t in enumerate(tokens)]
            chains.append([(beam.ids + tuple(tokens[:j + 1]), q[j], p[j]) for j in range(len(tokens))])
            gained = beam.score + sum(float(lp[i, tokens[i]]) for i in range(n))
            if n and tokens[n - 1] in search.eos:  # the accepted prefix ends the text: nothing to branch
                candidates.append(Node(parent, tuple(tokens[:n]), gained, beam.ids + tuple(tokens[:n]),
                                       probs=tuple(p[:n]), accepted=n, layer=(r, 0)))
                continue
            branch = lp[n].clone()
            if n < len(tokens):
                branch[tokens[n]] = -math.inf  # p' = norm(max(0, p − q)) for a point-mass q: p without the refused
            for token in torch.topk(branch, k).indices.tolist():
                added = tuple(tokens[:n]) + (token,)
                candidates.append(Node(parent, added, gained + float(lp[n, token]), beam.ids + added,
                                       probs=tuple(p[:n]) + (math.exp(float(lp[n, token])),), accepted=n,
                                       layer=(r, 0)))
        t_rank = self.clock()
        layer = search.select(candidates)
        other = self.clock() - t_rank + (t_rank - t_start - draft_s - verify_s)
        levels = [[chain[j] for chain in chains if len(chain) > j] for j in range(max(map(len, chains), default=0))]
        return RoundRecord([layer], ["branch"], levels, self.gamma, self.pool.forwards - before,
                           self._draft_forwards() - draft_before, Timing(draft_s, verify_s, other))

    def _draft_chains(self, depths: list[int]) -> list[tuple[list[int], list[float]]]:
        """Each running beam's greedy draft of its depth, cut after an end token (nothing after it is verified),
        with q of each token. A draft with a ``row_scorer`` drafts every beam's next token in one forward a step;
        any other proposes beam by beam."""
        beams, eos = self.search.running, self.search.eos
        if self.draft_rows is None:
            chains = []
            for beam, depth in zip(beams, depths):
                proposal = self.drafter.propose(self.prompt + list(beam.ids), depth, GREEDY, self.rng, KEEP_DRAFTING) \
                    if depth else None
                tokens = list(proposal.tokens) if proposal is not None else []
                q = [float(proposal.q[i, t]) if proposal.q is not None else 1.0 for i, t in enumerate(tokens)]
                end = next((i for i, t in enumerate(tokens) if t in eos), len(tokens) - 1)
                chains.append((tokens[: end + 1], q[: end + 1]))
            return chains
        chains = [([], []) for _ in beams]
        for step in range(max(depths, default=0)):
            live = [i for i, (tokens, _) in enumerate(chains)
                    if step < depths[i] and not (tokens and tokens[-1] in eos)]
            if not live:
                break
            rows = [self.prompt + list(beams[i].ids) + chains[i][0] for i in live]
            found = self.draft_rows.logprobs(rows, [1] * len(live))
            for i, lp in zip(live, found):
                token = int(lp[0].argmax())  # greedy, as ``propose`` drafts; q: the softmax at temperature 1
                chains[i][0].append(token)
                chains[i][1].append(math.exp(float(lp[0, token])))
        return chains

    def _draft_forwards(self) -> int:
        scored = self.draft_rows.forwards if self.draft_rows is not None else 0
        return scored + (self.drafter.runner.forwards if self.drafter.gives_distributions else 0)
