"""Beam search as the round driver's step (``BeamStep``): the trace's rounds are the best beam's history,
each round shown once it is settled."""

from __future__ import annotations

from ...engine.rounds import Round
from ...trace import RoundTrace, Timing
from .rules import RoundRecord, SpeculativeBeams
from .search import Node


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
