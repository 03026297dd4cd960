"""``beam``: beam search on the target, sped up by a draft (the reproduction report's Algorithm 2; Leviathan
et al., Appendix A.4). Greedy (a search, like ``generate(num_beams=k, do_sample=False)``). Two rules:

``exact`` (Leviathan et al. A.4): the draft runs its own beam search at width k for γ steps from the
    target's beams; the target scores every draft beam in one forward per beam row; step j is accepted while
    the target's own beam step from its beams gives the same k beams as the draft's step j. The first step
    where they differ is the target's own (the correction), and after γ accepted steps the target adds one
    more (the bonus). Every step taken is the target's own beam step, so the output is identical to beam
    search on the target alone, which follows Hugging Face's rules (``TargetBeams``): 2k candidates per
    step, an end-of-sequence candidate among the top k finishes with its log-probability / its length
    (length penalty 1), the rest of the top k run on, the search stops when no running beam can beat the
    worst of k finished ones (``early_stopping=False``) or at ``max_new_tokens``.
``004`` (the reproduction report's Algorithm 2): each beam drafts γ tokens, the target verifies them with
    speculative sampling (greedy: accept while the draft is the target's argmax), and the beam branches after
    its accepted prefix into the k most likely tokens of p' = norm(max(0, p − q)) (greedy: p without the
    refused token; p_{γ+1} after a full accept); of all candidates the k best by running log-probability
    run on. Not beam search on the target: every beam takes the target's greedy path for its accepted
    prefix and candidates of different lengths compete on raw log-probability. As printed, the algorithm
    keeps one candidate per beam (k beams never form from one prompt) and adds only log p'(t) to a score;
    here a beam branches into k candidates and a score is the target's log-probability of every token a
    candidate gains, the running log-probability the report's text describes.

Beams are scored with the target's log-softmax at temperature 1. Each beam row runs through a pool of
single-sequence KV caches (``CachedForward``), one forward per row: a row reuses the cache that shares the
longest prefix with it, so a branch recomputes only what differs (Hugging Face batches the k rows in one
forward instead; on this CPU a forward of k rows costs about one of one row).

The trace: ``output_ids`` is the best finished beam, and its rounds are that beam's history, so every
single-sequence invariant of a trace holds for it: round r emits the tokens the best beam's ancestor gained
in round r (accepted draft steps, then the target's correction or bonus step); ``drafted`` is the draft's
beam along that ancestor. ``detail.beam`` keeps every beam of every step (``layers``, see ``check_round``),
which the beam-tree view draws.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from ..drafts import distribution_kinds, make_drafter
from ..engine.acceptance import greedy_accept
from ..engine.cache import CachedForward, common_prefix
from ..engine.drafters import KEEP_DRAFTING
from ..engine.forward import full_forward
from ..engine.rounds import Round, clock_for, run_rounds
from ..engine.sampling import SamplingConfig
from ..trace import RoundTrace, Timing
from ..errors import ExplorerError
from ..limits import clip
from ..run import Decoding
from ..untrusted import Refused
from . import Method, Options, Request, option, register

MAX_WIDTH = 8  # beams: each costs one target forward per round here
MAX_BEAM_WORK = 2048  # width × max_new_tokens: one request's beam rows (width 8: 256 tokens, ≈ minutes on 2 cores)
MAX_BEAM_GAMMA = 16  # draft steps per round: a round's record holds every beam of every step
LENGTH_PENALTY = 1.0  # Hugging Face's default: a finished beam scores its log-probability / its length
RULES = ("exact", "004")
GREEDY = SamplingConfig(0.0)


@dataclasses.dataclass(frozen=True)
class BeamOptions(Options):
    prefix = "beam_"
    title = "Speculative beam search"

    width: int = option(3, "beams kept per step", paper="004 Algorithm 2, k; Leviathan et al. A.4", symbol="k",
                        low=1, high=MAX_WIDTH, label="beam width k", slider=(1, MAX_WIDTH, 1))
    rule: str = option("exact", "exact: Leviathan et al. A.4, the draft's beam search checked step by step, output "
                       "identical to beam search on the target; 004: the reproduction report's Algorithm 2, each beam "
                       "verified by speculative sampling then branched (approximate)", choices=RULES,
                       label="rule: exact (A.4) or 004 (approximate)")


# -- beam search on the target, Hugging Face's rules --------------------------------------------------------


@dataclasses.dataclass
class Node:
    """A beam or a candidate: ``tokens`` it adds to its parent, its running log-probability ``score``."""

    parent: int  # index into the previous layer's kept nodes (the first layer: 0, the prompt)
    tokens: tuple[int, ...]
    score: float
    ids: tuple[int, ...]  # every generated token of the beam so far
    kept: bool = False
    finished: bool = False
    probs: tuple[float, ...] = ()  # the target's probability of each of ``tokens``
    accepted: int = 0  # (004) how many of ``tokens`` are accepted drafts
    layer: tuple[int, int] = (0, 0)  # (round, layer in round): where it was made
    index: int = 0  # its place in its layer's records

    def record(self) -> dict:
        return {"parent": self.parent, "tokens": list(self.tokens), "score": round(self.score, 4),
                "kept": self.kept, "finished": self.finished}


class TargetBeams:
    """The running beams (best first) and the finished ones of a beam search, stepped by Hugging Face's
    rules (``generate`` with ``num_beams=k``, ``do_sample=False``, ``length_penalty=1``,
    ``early_stopping=False``; transformers' ``_beam_search``)."""

    def __init__(self, k: int, eos: set[int], max_new: int):
        self.k, self.eos, self.max_new = k, eos, max_new
        self.running = [Node(0, (), 0.0, ())]
        self.finished: list[tuple[float, Node]] = []  # (score / length, node), best first, at most k
        self.improvable = True
        self.done = False

    @property
    def length(self) -> int:
        return len(self.running[0].ids)

    def step(self, logprobs: torch.Tensor, where: tuple[int, int]) -> list[Node]:
        """One step from the running beams, given the target's log-probabilities (beams, V) after each of
        them; returns the candidates considered (kept ones first, in rank order, then the pruned)."""
        scores = torch.tensor([b.score for b in self.running], dtype=torch.float32)[:, None] + logprobs.float()
        vocab = logprobs.shape[1]
        top, index = torch.topk(scores.flatten(), min(max(2, 1 + len(self.eos)) * self.k, scores.numel()))
        length = self.length + 1
        last = length >= self.max_new
        normalised = (top / length ** LENGTH_PENALTY).tolist()
        candidates, running = [], []
        for rank, (score, i, norm) in enumerate(zip(top.tolist(), index.tolist(), normalised)):
            parent, token = divmod(i, vocab)
            node = Node(parent, (token,), score, self.running[parent].ids + (token,),
                        probs=(math.exp(float(logprobs[parent, token])),), layer=where)
            ends = token in self.eos or last
            if ends and rank < self.k and self.improvable:
                node.finished = True
                self._finish(norm, node)
            if not ends and len(running) < self.k:
                node.kept = True
                running.append(node)
            candidates.append(node)
        self.running = running
        self._check_done(length, all(c.tokens[0] in self.eos or last for c in candidates))
        return _in_order(candidates)

    def select(self, candidates: list[Node]) -> list[Node]:
        """Algorithm 2's selection over candidates of any length: by running log-probability, one that ends
        (end-of-sequence, or ``max_new_tokens``) among the top k finishes with its score / its length, the
        first k that do not end run on; the search stops as ``step``'s does."""
        candidates.sort(key=lambda c: -c.score)  # stable: a beam's candidates stay in its order on a tie
        running = []
        for rank, c in enumerate(candidates):
            ends = c.tokens[-1] in self.eos or len(c.ids) >= self.max_new
            if ends and rank < self.k and self.improvable:
                c.finished = True
                self._finish(c.score / len(c.ids) ** LENGTH_PENALTY, c)
            if not ends and len(running) < self.k:
                c.kept = True
                running.append(c)
        self.running = running
        if running:
            self._check_done(len(running[0].ids), False)
        else:
            self.done = True
        return _in_order(candidates)

    def _finish(self, score: float, node: Node) -> None:
        self.finished.append((score, node))
        self.finished.sort(key=lambda f: -f[0])  # stable: an earlier finisher keeps its place on a tie
        del self.finished[self.k:]

    def _check_done(self, length: int, all_end: bool) -> None:
        full = len(self.finished) == self.k
        if self.running:
            best = torch.tensor(self.running[0].score, dtype=torch.float32) / length ** LENGTH_PENALTY
            self.improvable = self.improvable and (not full or float(best) > self.finished[-1][0])
        self.done = not self.running or not self.improvable or all_end

    def best(self) -> Node:
        return self.finished[0][1] if self.finished else self.running[0]


def _in_order(candidates: list[Node]) -> list[Node]:
    """The kept candidates first (in rank order), then the pruned; each told its place."""
    ordered = [c for c in candidates if c.kept] + [c for c in candidates if not c.kept]
    for n, c in enumerate(ordered):
        c.index = n
    return ordered


# -- the runners: single-sequence KV caches shared by the beams ---------------------------------------------


class RunnerPool:
    """Target forwards for beam rows through ``size`` KV caches; a row takes the cache that shares the
    longest prefix with it (not one already used for this batch of rows while a fresh one is left)."""

    def __init__(self, forward, device, size: int):
        self.runners = [CachedForward(forward, device) for _ in range(size)]

    def logprobs(self, rows: list[list[int]], n_logits: list[int]) -> list[torch.Tensor]:
        """For each row, (n, V) log-probabilities after each of its last n positions."""
        used: set[int] = set()
        out = []
        for row, n in zip(rows, n_logits):
            free = [i for i in range(len(self.runners)) if i not in used] or list(range(len(self.runners)))
            pick = max(free, key=lambda i: common_prefix(self.runners[i].ids, row))
            used.add(pick)
            out.append(self.runners[pick].logits(row, n).float().log_softmax(dim=-1))
        return out

    @property
    def forwards(self) -> int:
        return sum(r.forwards for r in self.runners)


@dataclasses.dataclass
class RoundRecord:
    """What one round did, before the best beam is known (``trace_rounds`` turns it into a RoundTrace)."""

    layers: list[list[Node]]
    kinds: list[str]  # per layer: accepted | corrected | bonus | target (no draft) | branch (004)
    levels: list[list[tuple[tuple[int, ...], float, float]]]  # the draft's beams after j steps: (ids, q, p)
    drafted_steps: int
    target_forwards: int
    draft_forwards: int
    timing: Timing


# -- the two rules -------------------------------------------------------------------------------------------


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
        self.pool = RunnerPool(full_forward(target.model), target.device, 2 * self.k)
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
        draft_before = self.drafter.runner.forwards
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
                           self.drafter.runner.forwards - draft_before, Timing(t1 - t0, t2 - t1, t3 - t2))

    def _draft_beam_search(self, depth: int) -> list[list[tuple[tuple[int, ...], float]]]:
        """The draft's beam search at width k for ``depth`` steps from the target's running beams, scored
        from the target's running scores with the draft's log-probabilities (end-of-sequence candidates
        leave it: the target decides what finishes). Level j: [(beam ids, q of its last token)]."""
        runner, eos = self.drafter.runner, self.search.eos
        beams = [(b.ids, b.score, 1.0) for b in self.search.running]
        levels = [[(ids, q) for ids, _, q in beams]]
        for _ in range(depth):
            rows = [runner.logits(self.prompt + list(ids), 1)[0].float().log_softmax(dim=-1) for ids, _, _ in beams]
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
        draft_s = verify_s = 0.0
        t_start = self.clock()
        draft_before, before = self._draft_forwards(), self.pool.forwards
        candidates, chains = [], []
        for parent, beam in enumerate(search.running):
            depth = max(0, min(self.gamma, search.max_new - len(beam.ids) - 1))
            t0 = self.clock()
            proposal = self.drafter.propose(self.prompt + list(beam.ids), depth, GREEDY, self.rng, KEEP_DRAFTING) \
                if depth else None
            tokens = list(proposal.tokens) if proposal is not None else []
            end = next((i for i, t in enumerate(tokens) if t in search.eos), None)
            tokens = tokens if end is None else tokens[: end + 1]  # nothing after the end is verified
            t1 = self.clock()
            lp = self.pool.logprobs([self.prompt + list(beam.ids) + tokens], [len(tokens) + 1])[0]  # (n+1, V)
            draft_s, verify_s = draft_s + t1 - t0, verify_s + self.clock() - t1
            n = greedy_accept(lp.argmax(dim=-1).tolist(), tokens).n_accepted  # speculative sampling, greedy
            q = [float(proposal.q[i, t]) if proposal.q is not None else 1.0 for i, t in enumerate(tokens)]
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

    def _draft_forwards(self) -> int:
        runner = getattr(self.drafter, "runner", None)
        return runner.forwards if runner is not None else 0



# -- the trace: the best beam's history, round by round as it settles -----------------------------------------


class BeamStep:
    """Beam search as the round driver's step. Each call runs one round of the search; the trace's rounds
    are the best beam's history (see the module's doc), and round r of it is shown as soon as every beam
    that can still win (the running ones and the finished ones kept) descends from the same node at the
    end of round r: nothing the search does later can change it. Until then the step returns None (the
    driver's heartbeat, where Stop takes effect); when the search ends, the rest of the winner's history
    follows. A stopped run's trace is therefore a prefix of the text the search would have returned."""

    def __init__(self, beams: SpeculativeBeams, rule: str, width: int):
        self.beams, self.rule, self.width = beams, rule, width
        self.shown = 0  # rounds of the history handed to the driver
        self.step_of: dict[tuple[int, int], int] = {}  # (round, step in round) → its place among all steps
        self.kept: list[list[Node]] = []  # the candidates each step kept, in rank order
        self.path: dict[tuple[int, int], Node] = {}  # the settled line of ancestors: (round, step) → node

    def __call__(self, round_: Round):
        search = self.beams.search
        settled = self._settled()
        if self.shown >= settled and not search.done:
            self.beams.next_round()
            for j, layer in enumerate(self.beams.rounds[-1].layers):
                self.step_of[(len(self.beams.rounds) - 1, j)] = len(self.kept)
                self.kept.append([c for c in layer if c.kept])
            settled = self._settled()
        if self.shown >= settled:
            if search.done:  # the winner's history is shown whole before its end token or its last length
                raise RuntimeError("beam search ended with its history shown but the text unfinished")
            return None
        r = self.shown
        self.shown += 1
        emitted = [t for j in range(len(self.beams.rounds[r].layers)) if (r, j) in self.path
                   for t in self.path[(r, j)].tokens]
        context_len = round_.commit(emitted)
        path = dict(self.path)
        # the winner's last round also pays for the search's rounds after it (they ruled out the other beams)
        after = self.beams.rounds[r + 1:] if search.done and r == search.best().layer[0] else []
        return lambda: self._record(r, path, context_len, after)

    def _contenders(self) -> list[Node]:
        search = self.beams.search
        return [search.best()] if search.done else list(search.running) + [n for _, n in search.finished]

    def _parent(self, node: Node) -> Node | None:
        g = self.step_of[node.layer]
        return self.kept[g - 1][node.parent] if g else None

    def _settled(self) -> int:
        """How many rounds of the best beam's history are fixed: those whose last node on every contender's
        line of ancestors is the same. Walks back from the newest step until the lines meet (their common
        ancestor), and keeps that ancestor's line in ``path``."""
        if not self.beams.rounds:
            return 0
        contenders = self._contenders()
        nodes = list({id(n): n for n in contenders}.values())
        while len(nodes) > 1:
            latest = max(self.step_of[n.layer] for n in nodes)
            older = [self._parent(n) if self.step_of[n.layer] == latest else n for n in nodes]
            if any(n is None for n in older):
                return 0  # they part at the first step
            nodes = list({id(n): n for n in older}.values())
        anchor = nodes[0]
        node = anchor
        while node is not None and self.path.get(node.layer) is not node:
            self.path[node.layer] = node
            node = self._parent(node)
        r, j = anchor.layer
        ends_round = j == len(self.beams.rounds[r].layers) - 1 or all(c is anchor for c in contenders)
        return r + 1 if ends_round else r

    def _record(self, r: int, path: dict[tuple[int, int], Node], context_len: int,
                after: list[RoundRecord]) -> RoundTrace:
        rec = self.beams.rounds[r]
        nodes = [path[(r, j)] for j in range(len(rec.layers)) if (r, j) in path]
        before = next((path[(r - 1, j)].ids for j in range(len(self.beams.rounds[r - 1].layers) - 1, -1, -1)
                       if (r - 1, j) in path), ()) if r else ()
        emitted = tuple(t for n in nodes for t in n.tokens)
        probs = tuple(p for n in nodes for p in n.probs)
        drafted, q, p = _lineage(rec.levels, before, nodes[-1].ids)
        if self.rule == "exact":
            n_accepted = sum(rec.kinds[j] == "accepted" for j in range(len(nodes)))
            last = rec.kinds[len(nodes) - 1] if len(nodes) > n_accepted else None
        else:
            n_accepted = nodes[0].accepted
            last = None if len(emitted) == n_accepted else "bonus" if n_accepted == len(drafted) else "corrected"
        kind = {"corrected": "corrected", "bonus": "bonus", "target": "target"}.get(last)
        rejected = n_accepted if kind == "corrected" and n_accepted < len(drafted) else None
        detail = {"beam": {"rule": self.rule, "width": self.width, "drafted_steps": rec.drafted_steps,
                           "kinds": rec.kinds, "layers": [[n.record() for n in layer] for layer in rec.layers],
                           "best": [path[(r, j)].index if (r, j) in path else -1 for j in range(len(rec.layers))]}}
        timing, target_forwards, draft_forwards = rec.timing, rec.target_forwards, rec.draft_forwards
        if after:  # folded in: their cost, and how many rounds and steps the search still took
            timing = Timing(*(sum(getattr(x.timing, f) for x in [rec, *after]) for f in ("draft_s", "verify_s", "other_s")))
            target_forwards += sum(x.target_forwards for x in after)
            draft_forwards += sum(x.draft_forwards for x in after)
            detail["beam"]["after"] = {"rounds": len(after), "steps": sum(len(x.layers) for x in after)}
        return RoundTrace(
            index=r, context_len=context_len, drafted=tuple(drafted), q_drafted=tuple(q), p_drafted=tuple(p),
            n_accepted=n_accepted, emitted=emitted, emitted_kind=("accepted",) * n_accepted + ((kind,) if kind else ()),
            p_emitted=probs, event="rejected" if rejected is not None else "all-accepted" if drafted else "no-draft",
            timing=timing, rejected_at=rejected, draft_forwards=draft_forwards, target_forwards=target_forwards,
            detail=detail)


def _lineage(levels, start: tuple[int, ...], best: tuple[int, ...]):
    """The draft's tokens from ``start`` along the best beam where the draft has it, then along the draft's
    best-ranked beams: (tokens, q, p)."""
    ids, tokens, qs, ps = start, [], [], []
    for level in levels:
        children = [c for c in level if c[0][:len(ids)] == ids and len(c[0]) == len(ids) + 1]
        if not children:
            break
        child = next((c for c in children if best[:len(c[0])] == c[0]), children[0])
        ids = child[0]
        tokens.append(ids[-1])
        qs.append(round(child[1], 6))
        ps.append(round(child[2], 6))
    return tokens, qs, ps


# -- the method ----------------------------------------------------------------------------------------


def start(request: Request, options: BeamOptions) -> Decoding:
    if not request.sampling.greedy:
        raise ExplorerError("beam search here is a search, like generate(num_beams=k, do_sample=False): set temperature 0")
    work = options.width * request.settings.max_new_tokens
    if work > MAX_BEAM_WORK:
        raise ExplorerError(f"beam search of width {options.width} costs about {options.width} target forwards a token: "
                            f"width × max_new_tokens may be at most {MAX_BEAM_WORK} (here {work}); ask for fewer "
                            "tokens or a narrower beam")
    drafter = make_drafter(request.draft, request.target, request.load, "beam")
    if options.rule == "exact" and getattr(drafter, "runner", None) is None:
        raise ExplorerError(f"the exact rule runs the draft's own beam search, so it needs a draft with "
                            f"distributions (model:<name>, early-exit:N, int4 or int8), not {drafter.spec}")
    settings = dataclasses.replace(request.settings, controller="fixed", gamma=min(request.settings.gamma, MAX_BEAM_GAMMA))

    target = request.target
    beams = SpeculativeBeams(request, options, drafter, clock_for(target.device))
    rounds = run_rounds(target.device, target.eos_token_ids, BeamStep(beams, options.rule, options.width),
                        request.prompt_ids, settings.max_new_tokens)
    return Decoding(request, "beam", drafter.spec, settings, rounds, drafter.about)


def check_round(data: dict, path: str) -> None:
    """A loaded round's ``detail.beam``: what the beam-tree view reads, of its kinds and sizes."""
    beam = data.get("detail", {}).get("beam")
    if beam is None:
        return
    where = f"{path}.detail.beam"
    if not isinstance(beam, dict) or beam.get("rule") not in RULES or not _whole(beam.get("width"), 1, MAX_WIDTH):
        raise Refused(f"{where} must name its rule ({', '.join(RULES)}) and a width from 1 to {MAX_WIDTH}")
    after = beam.get("after")
    if after is not None and not (isinstance(after, dict) and _whole(after.get("rounds"), 1, 2**31 - 1)
                                  and _whole(after.get("steps"), 1, 2**31 - 1)):
        raise Refused(f"{where}.after must count the search's rounds and steps after the winner's last round")
    layers, kinds, best = beam.get("layers"), beam.get("kinds"), beam.get("best")
    if not (isinstance(layers, list) and 1 <= len(layers) <= MAX_BEAM_GAMMA + 1):
        raise Refused(f"{where}.layers must be a list of 1 to {MAX_BEAM_GAMMA + 1} steps")
    if not (isinstance(kinds, list) and len(kinds) == len(layers) and all(k in LAYER_KINDS for k in kinds)):
        raise Refused(f"{where}.kinds must name one of {', '.join(LAYER_KINDS)} per step")
    if not (isinstance(best, list) and len(best) == len(layers)):
        raise Refused(f"{where}.best must hold one index per step")
    for i, (layer, on_best) in enumerate(zip(layers, best)):
        if not (isinstance(layer, list) and 1 <= len(layer) <= MAX_WIDTH * MAX_WIDTH):
            raise Refused(f"{where}.layers[{i}] must list 1 to {MAX_WIDTH * MAX_WIDTH} candidates")
        if not _whole(on_best, -1, len(layer) - 1):
            raise Refused(f"{where}.best[{i}] must be -1 or a candidate's index")
        for n, node in enumerate(layer):
            ok = isinstance(node, dict) and _whole(node.get("parent"), 0, MAX_WIDTH * MAX_WIDTH) \
                and isinstance(node.get("tokens"), list) and 1 <= len(node["tokens"]) <= MAX_BEAM_GAMMA + 1 \
                and all(_whole(t, 0, 2**31 - 1) for t in node["tokens"]) \
                and isinstance(node.get("score"), (int, float)) and not isinstance(node.get("score"), bool) \
                and math.isfinite(node["score"]) and abs(node["score"]) < 1e9 \
                and isinstance(node.get("kept"), bool) and isinstance(node.get("finished"), bool)
            if not ok:
                raise Refused(f"{where}.layers[{i}][{n}] must be a candidate: parent index, 1 to "
                              f"{MAX_BEAM_GAMMA + 1} token ids, a finite score, kept and finished flags")


LAYER_KINDS = ("accepted", "corrected", "bonus", "target", "branch")


def _whole(value, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def system(rest: str) -> dict:
    """``beam:<rule>:<k>:<draft>`` as decode keywords."""
    rule, _, after = rest.partition(":")
    width, _, draft = after.partition(":")
    if rule not in RULES or not width.isdigit() or not draft:
        raise ExplorerError(f"bad system {clip('beam:' + rest, 60)}: write beam:<{'|'.join(RULES)}>:<k>:<draft>[@γ]")
    return {"beam_rule": rule, "beam_width": int(width), "draft": draft}


def round_tokens(r) -> list[int]:
    """The ids of every candidate the beam search weighed in a round."""
    return [t for layer in (r.detail.get("beam") or {}).get("layers", ()) for node in layer for t in node["tokens"]]


register(Method(
    name="beam",
    paper="Leviathan et al. 2023, A.4; Tulsian et al. (004), Algorithm 2",
    summary="speculative beam search: exact (Leviathan et al. A.4: the draft's beam search checked step by step, "
            "identical to beam search on the target) or 004 (the reproduction's Algorithm 2, approximate); greedy",
    lossy=lambda options: options is not None and options.rule == "004",
    options=BeamOptions,
    start=start,
    controller=False,
    gamma=True,  # the draft's steps per round; no controller chooses them
    check_round=check_round,
    round_tokens=round_tokens,
    system=system,
    glossary="speculative beam search: k candidate texts (beams) kept at once, each extended by the draft and "
             "checked by the target. Rule **exact** (Leviathan et al., Appendix A.4) keeps the draft's beam steps "
             "only where they equal the target's own, so the result is the target's beam search; rule **004** "
             "follows the reproduction report of speculative decoding (Tulsian, Goyal and Aggarwal), whose "
             "**Algorithm 2** branches after each verified draft: faster, approximate (lossy).",
    system_syntax=f"beam:<{'|'.join(RULES)}>:<k>:<draft>[@γ]",
    drafts=lambda options: distribution_kinds() if options is None or options.rule == "exact"
    else distribution_kinds() + ("prompt-lookup",),
    default_draft="early-exit:4",
    draft_words="Beam search's exact rule runs the draft's own beam search, so the draft must give distributions: "
                "model:<name>, early-exit:N, int4 or int8 (the 004 rule also takes prompt-lookup:n).",
))
