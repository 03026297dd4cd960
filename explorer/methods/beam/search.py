"""Beam search on the target by Hugging Face's rules (``TargetBeams``), and the beams and candidates it
steps (``Node``)."""

from __future__ import annotations

import dataclasses
import math

import torch

LENGTH_PENALTY = 1.0  # Hugging Face's default: a finished beam scores its log-probability / its length


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
