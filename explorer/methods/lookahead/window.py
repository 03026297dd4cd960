"""Lookahead decoding's two data structures (Fu et al., ICML 2024, arXiv 2402.02057, section 3): the 2-D
Jacobi window of the lookahead branch and the n-gram pool the verification branch draws from. Plain Python:
no model here (``step`` feeds them).

The window holds the last N − 1 Jacobi steps (levels), each W guesses: level l's column j stands at j + l + 1
positions after the last decided token. In one forward, the token at level l, column j sees the context, level
0's columns 0 … j and column j of levels 1 … l — a run of consecutive positions, so its output is the model's
guess for the position after it (a Jacobi update). The top level's outputs form the next level; the oldest
level drops. Reading a column from level 0 up and adding its new output gives an n-gram (N tokens) that the
model itself produced, one position after another: the pool keeps it under its first token, and a later round
whose last token is that one verifies the other N − 1 as a guess.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from functools import lru_cache

import torch

from ...trace.window import window_visibility


class Window:
    """The lookahead branch's 2-D window: ``levels[0]`` the oldest Jacobi step, each a list of W tokens."""

    def __init__(self, width: int, n: int, seed_tokens: list[int], seed: int):
        """Level 0 starts as ``width`` tokens drawn from ``seed_tokens`` (the prompt); the levels above it fill
        over the first N − 2 rounds (the paper's warm-up), one Jacobi step each."""
        pick = random.Random(seed)
        self.width, self.n = width, n
        self.levels: list[list[int]] = [[pick.choice(seed_tokens) for _ in range(width)]]

    @property
    def full(self) -> bool:
        """Whether the window holds N − 1 levels (n-grams are collected from then on)."""
        return len(self.levels) == self.n - 1

    def rows(self) -> tuple[list[int], list[int], torch.Tensor]:
        """The window as rows of one forward: tokens and offsets (positions after the last decided token), level
        by level, and the (E, E) visibility among them (``visibility``)."""
        w, n_levels = self.width, len(self.levels)
        tokens = [t for level in self.levels for t in level]
        offsets = [1 + j + l for l in range(n_levels) for j in range(w)]
        return tokens, offsets, visibility(n_levels, w)

    def step(self, outputs: list[int]) -> list[tuple[int, ...]]:
        """Take the top level's outputs (one per column) as the next level; the n-grams this completes (one per
        column once the window is full: the column from level 0 up, then the new token); the oldest level drops
        when the window is full."""
        grams = []
        if self.full:
            grams = [tuple(level[j] for level in self.levels) + (outputs[j],) for j in range(self.width)]
            self.levels.pop(0)
        self.levels.append(list(outputs))
        return grams


@lru_cache(maxsize=64)
def visibility(n_levels: int, width: int) -> torch.Tensor:
    """(E, E) bool over a window's rows, level by level (``trace.window.window_visibility``, the rule the view draws
    too). One per shape (every round of a run asks for the same one): read it, never write it."""
    size = n_levels * width
    return torch.tensor(window_visibility(n_levels, width), dtype=torch.bool).reshape(size, size)  # (E, E)


class Pool:
    """The n-gram pool: under each first token, the continuations (N − 1 tokens) most recently seen, at most
    ``per_key`` of them (the paper's G), newest last, each with where it came from ("prompt" or "window"); a
    continuation seen again moves to the end (keeping its first source)."""

    MAX_KEYS = 50_000  # a run of 4096 tokens with W = 16 adds at most 65 536 n-grams: keys beyond this drop oldest

    def __init__(self, per_key: int):
        self.per_key = per_key
        self.size = 0  # n-grams kept, over every key
        self.grams: OrderedDict[int, OrderedDict[tuple[int, ...], str]] = OrderedDict()

    def add(self, grams: list[tuple[int, ...]], source: str = "window") -> int:
        """Add n-grams; how many were new."""
        new = 0
        for gram in grams:
            key, rest = gram[0], gram[1:]
            kept = self.grams.setdefault(key, OrderedDict())
            self.grams.move_to_end(key)
            if rest in kept:
                kept.move_to_end(rest)
                continue
            new += 1
            kept[rest] = source
            self.size += 1
            while len(kept) > self.per_key:
                kept.popitem(last=False)
                self.size -= 1
        while len(self.grams) > self.MAX_KEYS:
            self.size -= len(self.grams.popitem(last=False)[1])
        return new

    def add_text(self, tokens: list[int], n: int) -> int:
        """Every n-gram of a token sequence (the prompt, where the pool is seeded from it)."""
        return self.add([tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)], "prompt")

    def candidates(self, key: int) -> list[tuple[tuple[int, ...], str]]:
        """The continuations kept under ``key`` and their sources, newest first."""
        return list(reversed(self.grams.get(key, {}).items()))

    def __len__(self) -> int:
        return self.size


def trie(candidates: list[tuple[int, ...]], room: int) -> tuple[list[int], list[int], list[float], list[int]]:
    """The candidates merged into one token tree (shared prefixes verified once), each cut to ``room`` tokens:
    tokens, parents (-1: under the last decided token), each node's share of the candidates through it, and for
    each candidate the node its last token landed on. Nodes come parent first."""
    tokens: list[int] = []
    parents: list[int] = []
    through: list[int] = []
    ends: list[int] = []
    index: dict[tuple[int, int], int] = {}
    for gram in candidates:
        node = -1
        for token in gram[:room]:
            key = (node, token)
            if key not in index:
                index[key] = len(tokens)
                tokens.append(token)
                parents.append(node)
                through.append(0)
            node = index[key]
            through[node] += 1
        ends.append(node)
    share = [c / len(candidates) for c in through] if candidates else []
    return tokens, parents, share, ends
