"""What SuffixDecoding matches against, and the speculation tree it grows from a match (Oliaro et al.,
SuffixDecoding, arXiv 2411.04975, sections 3–4).

Three corpora, each a set of token sequences: the target's own answers shipped in ``assets/selfgen/`` (the
training split of the prompt bank: 1.4 M tokens; the held-out prompts' answers are left out, so a benchmark
on them measures matching, not recall), the finished outputs of this session (earlier runs: the paper's
"previous outputs"), and the request itself (the prompt and the answer so far: the paper's per-request tree).
A match is the longest suffix of the context (at most ``MAX_MATCH`` tokens) that occurs in a corpus; every
occurrence gives the tokens that followed it there.

The paper keeps suffix trees; here the large corpus is a suffix array over its *reversed* tokens (sorted to a
depth of ``MAX_MATCH``), in which the reversed context is a growing prefix, so each longer match narrows the
previous range by one binary search — the same longest match and the same occurrences a suffix tree's walk
finds. The small corpora are scanned directly. The speculation tree (section 4.2) grows greedily by the
frequency-based score: a node's probability is the product, along its path, of each step's count over its
parent's count (the share of earlier occurrences that continued that way); the most probable frontier node is
added next, up to MAX_SPEC = α·p nodes for a match of p tokens (the paper's adaptive size), while a node's
probability is at least ``min_prob``; the tree's score is the sum of its nodes' probabilities (its expected
accepted tokens), and of the corpora's trees the highest score is drafted.

Shape legend: n corpus tokens (separators included), k occurrences.
"""

from __future__ import annotations

import array
import hashlib
import heapq
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ... import machine
from ...shipped import ASSETS
from ..request import API_SESSION_PREFIX

MAX_MATCH = 64  # the longest suffix matched (the paper's maximum tree depth)
MAX_OCCURRENCES = 4096  # occurrences a node's children are counted over (evenly spaced beyond this)
SHIPPED = ASSETS / "selfgen"
BANK = ASSETS / "train_prompts.json"


@dataclass
class Match:
    """The longest suffix of the context found in one corpus: its length, where the occurrences continue
    (indices into ``tokens``, at most ``MAX_OCCURRENCES``, evenly spaced), how many there were, and what
    that corpus is."""

    source: str  # "answers" | "history" | "request"
    length: int
    tokens: np.ndarray  # the corpus (separators: SEP)
    starts: np.ndarray  # (k,) where each occurrence's continuation begins
    occurrences: int
    where: str = ""  # for the view: the sequence the first occurrence is in


@dataclass
class Speculation:
    """The speculation tree: node i is ``tokens[i]`` under ``parents[i]`` (-1: the context), reached by
    ``counts[i]`` of the match's occurrences, with probability ``probs[i]``; ``score`` = Σ probs."""

    match: Match | None
    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)

    @property
    def score(self) -> float:
        return float(sum(self.probs))


def speculate(match: Match, max_nodes: int, min_prob: float, sep: int) -> Speculation:
    """Grow the tree greedily from ``match`` (section 4.2): best-first by probability, ``max_nodes`` at most."""
    spec = Speculation(match)
    if match is None or max_nodes < 1 or len(match.starts) == 0:
        return spec
    tokens, n = match.tokens, len(match.tokens)
    # frontier: (-probability, tie-break, parent node, token, starts of its occurrences' next tokens)
    frontier: list = []
    order = 0

    def expand(parent: int, prob: float, starts: np.ndarray) -> None:
        nonlocal order
        starts = starts[starts < n]
        following = tokens[starts]
        keep = following != sep
        starts, following = starts[keep], following[keep]
        if len(starts) == 0:
            return
        total = len(starts) + int((~keep).sum())  # the occurrences that reached here, ended ones included
        values, inverse, counts = np.unique(following, return_inverse=True, return_counts=True)
        for k in np.nonzero(prob * counts / total >= min_prob)[0].tolist():  # at most 1 / min_prob of them
            order += 1
            count = int(counts[k])
            heapq.heappush(frontier, (-prob * count / total, order, parent, int(values[k]), starts[inverse == k] + 1,
                                      count))

    expand(-1, 1.0, match.starts)
    while frontier and len(spec.tokens) < max_nodes:
        negative, _, parent, token, starts, count = heapq.heappop(frontier)
        spec.tokens.append(token)
        spec.parents.append(parent)
        spec.probs.append(-negative)
        spec.counts.append(count)
        expand(len(spec.tokens) - 1, -negative, starts)
    return spec


# -- the corpora -----------------------------------------------------------------------------------------


def _spaced(starts: np.ndarray) -> np.ndarray:
    """At most ``MAX_OCCURRENCES`` of ``starts``, evenly spaced (a common short match occurs 10⁴–10⁵ times)."""
    if len(starts) <= MAX_OCCURRENCES:
        return starts
    return starts[np.linspace(0, len(starts) - 1, MAX_OCCURRENCES).astype(np.int64)]


def scan_match(sequence: list[int] | np.ndarray, context: list[int], source: str, most: int = MAX_MATCH,
               exclude_end: bool = True) -> Match | None:
    """The longest suffix of ``context`` in a small ``sequence`` by direct comparison (the request: prompt and
    answer so far; the session's outputs). ``exclude_end``: the sequence *is* the context, whose own end
    trivially matches and has nothing after it."""
    seq = np.asarray(sequence, dtype=np.int64)
    if len(seq) < 2 or not context:
        return None
    limit = len(seq) - 1 if exclude_end else len(seq)
    ends = np.nonzero(seq[:limit] == context[-1])[0]  # candidate positions of the context's last token
    if len(ends) == 0:
        return None
    length = np.ones(len(ends), dtype=np.int64)
    alive = np.ones(len(ends), dtype=bool)
    for d in range(1, min(most, len(context))):
        at = ends - d
        ok = alive & (at >= 0)
        ok[ok] = seq[at[ok]] == context[-1 - d]
        length += ok
        alive = ok
        if not alive.any():
            break
    best = int(length.max())
    starts = ends[length == best] + 1
    return Match(source, best, seq, _spaced(starts), len(starts))


class AnswerIndex:
    """The shipped answers as one corpus with a suffix array over its reversed tokens (built once per
    machine, a few seconds, kept under ``$EXPLORER_CACHE/suffix``)."""

    def __init__(self, tokens: np.ndarray, sequence_starts: np.ndarray, names: list[str], sa: np.ndarray,
                 build_s: float, loaded: bool):
        self.tokens = tokens  # (n,) int32, SEP between sequences
        self.sequence_starts = sequence_starts
        self.names = names
        self.sa = sa  # suffix array of tokens[::-1], sorted to MAX_MATCH tokens
        self.reversed = tokens[::-1].copy()
        self.first = self.reversed[sa]  # each sorted suffix's first token: the first narrowing's keys
        # the same as plain arrays for the binary searches' one-at-a-time reads (a numpy scalar read costs
        # ≈ 10× a list's)
        self._sa, self._reversed = array.array("i", sa.tobytes()), array.array("i", self.reversed.tobytes())
        self.build_s, self.loaded = build_s, loaded

    def _bound(self, lo: int, hi: int, d: int, token: int) -> int:
        """The first index in [lo, hi) whose suffix's token at depth ``d`` is ≥ ``token`` (a suffix that
        ends before ``d`` counts as −1)."""
        n, sa, rev = len(self._reversed), self._sa, self._reversed
        while lo < hi:
            mid = (lo + hi) // 2
            at = sa[mid] + d
            if (rev[at] if at < n else -1) < token:
                lo = mid + 1
            else:
                hi = mid
        return lo

    @classmethod
    def build(cls, sequences: list[np.ndarray], names: list[str], sep: int, folder: Path | None = None,
              label: str = "corpus") -> "AnswerIndex":
        """The sequences joined by ``sep`` (an id no token has) and indexed; the suffix array is kept in
        ``folder`` (keyed by the corpus's hash) and read from there next time."""
        start = time.perf_counter()
        corpus = np.concatenate([np.concatenate([s, [sep]]) for s in sequences]).astype(np.int32)
        sequence_starts = np.cumsum([0] + [len(s) + 1 for s in sequences[:-1]]).astype(np.int64)
        path = None
        if folder is not None:
            key = hashlib.sha256(corpus.tobytes()).hexdigest()[:16]
            path = Path(folder) / f"{label}-{key}-d{MAX_MATCH}.npy"
        sa, loaded = None, False
        if path is not None:
            try:
                sa = np.load(path, allow_pickle=False)
                loaded = sa.shape == corpus.shape and sa.dtype == np.int32
            except (OSError, ValueError):
                pass
        if not loaded:
            sa = suffix_array(corpus[::-1].copy(), MAX_MATCH)
            if path is not None:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    temporary = path.with_name(f"{path.stem}.tmp.npy")
                    np.save(temporary, sa)
                    temporary.replace(path)
                except OSError:
                    pass
        return cls(corpus, sequence_starts, names, sa, time.perf_counter() - start, loaded)

    @property
    def nbytes(self) -> int:
        return (self.tokens.nbytes + self.sa.nbytes + self.reversed.nbytes + self.first.nbytes
                + self.sequence_starts.nbytes + 2 * 4 * len(self._sa))

    def match(self, context: list[int], most: int = MAX_MATCH) -> Match | None:
        """The longest suffix of ``context`` (≤ ``most``) that occurs in the answers, and its occurrences:
        each longer suffix narrows the previous range of the suffix array by a binary search on the next
        (reversed) token, which is sorted within the range; once a few occurrences are left they are
        checked one by one."""
        if not context:
            return None
        n, sa, rev = len(self._reversed), self._sa, self._reversed
        lo, hi = (int(i) for i in np.searchsorted(self.first, [context[-1], context[-1] + 1]))
        if hi == lo:
            return None
        length, depth, longest = 1, min(most, len(context)), False
        while length < depth and hi - lo > 32:
            token = context[-1 - length]
            a, b = self._bound(lo, hi, length, token), self._bound(lo, hi, length, token + 1)
            if a == b:
                longest = True
                break
            lo, hi, length = a, b, length + 1
        found = self.sa[lo:hi]
        if not longest and length < depth:
            kept = list(sa[lo:hi])
            while length < depth:
                token = context[-1 - length]
                narrower = [j for j in kept if j + length < n and rev[j + length] == token]
                if not narrower:
                    break
                kept, length = narrower, length + 1
            found = np.asarray(kept)
        # reversed index j of the context's last token -> forward index n - 1 - j; its continuation one after
        starts = np.sort(n - found.astype(np.int64))
        spaced = _spaced(starts)
        sequence = int(np.searchsorted(self.sequence_starts, spaced[0], "right")) - 1
        return Match("answers", length, self.tokens, spaced, len(starts), self.names[sequence])


def suffix_array(tokens: np.ndarray, depth: int) -> np.ndarray:
    """Indices of ``tokens``' suffixes sorted by their first ``depth`` tokens (prefix doubling; a suffix
    that ends sorts before its extensions)."""
    n = len(tokens)
    rank = tokens.astype(np.int64)
    order = np.argsort(rank, kind="stable")
    k = 1
    while k < depth:
        second = np.full(n, -1, dtype=np.int64)
        second[: n - k] = rank[k:]
        order = np.lexsort((second, rank))
        first, after = rank[order], second[order]
        new_group = np.ones(n, dtype=np.int64)
        new_group[1:] = (first[1:] != first[:-1]) | (after[1:] != after[:-1])
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.cumsum(new_group) - 1
        if rank[order[-1]] == n - 1:  # every suffix told apart
            break
        k *= 2
    return order.astype(np.int32)


_INDEX_LOCK = threading.Lock()
_INDEXES: dict[str, AnswerIndex | None] = {}


def answer_index(fingerprint: str, vocab_size: int) -> AnswerIndex | None:
    """The shipped answers for the model with ``fingerprint`` (training split only), indexed; None when none
    ship for it. Once per process; the suffix array is read from the cache when it was built before."""
    with _INDEX_LOCK:
        if fingerprint not in _INDEXES:
            _INDEXES[fingerprint] = _build_index(fingerprint, vocab_size)
        return _INDEXES[fingerprint]


def _training_ids() -> set[str]:
    import json

    try:
        bank = json.loads(BANK.read_text(encoding="utf-8"))["prompts"]
    except (OSError, ValueError, KeyError):
        return set()
    return {p["id"] for p in bank if p.get("split") == "train"}


def _build_index(fingerprint: str, vocab_size: int) -> AnswerIndex | None:
    start = time.perf_counter()
    train = _training_ids()
    sequences, names = [], []
    for archive in sorted(SHIPPED.glob(f"{fingerprint}-*.npz")):
        try:
            with np.load(archive, allow_pickle=False) as data:
                ids, lengths, tokens = data["prompt_id"], data["answer_length"].astype(np.int64), data["tokens"]
        except (OSError, ValueError, KeyError):
            continue
        if len(ids) != len(lengths) or int(lengths.sum()) != len(tokens):
            continue
        mode = "greedy" if "-greedy-" in archive.name else "sampled"
        ends = np.cumsum(lengths)
        for pid, length, end in zip(ids.tolist(), lengths.tolist(), ends.tolist()):
            if pid in train and length:
                sequences.append(tokens[end - length:end].astype(np.int32))
                names.append(f"the {mode} answer to bank prompt {pid}")
    if not sequences or any(int(s.max()) >= vocab_size for s in sequences):
        return None
    index = AnswerIndex.build(sequences, names, vocab_size, machine.cache_root() / "suffix", fingerprint)
    index.build_s = time.perf_counter() - start
    return index


class History:
    """Each session's finished outputs (the paper's previous outputs), newest kept up to ``MAX_TOKENS`` a
    session and ``MAX_SESSIONS`` sessions (int32: 13 MB at most): one visitor's outputs are never drafted
    for another.

    A session of ``None`` is a caller who cannot be told apart from others (the app's MCP calls all arrive as
    one client): it neither joins a history nor drafts from one. Sessions named ``API_PREFIX…`` (public-API
    callers, who may open a session per call) give way before any other: 64 one-token API calls evicted every
    page visitor's outputs (issue 40)."""

    MAX_TOKENS = 50_000
    MAX_SESSIONS = 64
    API_PREFIX = API_SESSION_PREFIX

    def __init__(self):
        self._lock = threading.Lock()
        self._outputs: dict[tuple[str, str], list[np.ndarray]] = {}

    def add(self, fingerprint: str, session: str | None, output: list[int]) -> None:
        if session is None or not len(output):
            return
        with self._lock:
            kept = self._outputs.pop((fingerprint, session), [])
            kept.append(np.asarray(output[-self.MAX_TOKENS:], dtype=np.int32))
            while sum(map(len, kept)) > self.MAX_TOKENS:
                kept.pop(0)
            self._outputs[(fingerprint, session)] = kept
            while len(self._outputs) > self.MAX_SESSIONS:  # the least recently added, API callers first
                oldest = next((key for key in self._outputs if key[1].startswith(self.API_PREFIX)),
                              next(iter(self._outputs)))
                del self._outputs[oldest]

    def export(self, session: str | None) -> list[tuple[str, list[int]]]:
        """The session's outputs as plain data, (model fingerprint, tokens) oldest first: what a GPU worker
        (another process, ``ui.zerogpu``) is handed and hands back."""
        with self._lock:
            return [(fingerprint, output.tolist()) for (fingerprint, owner), kept in self._outputs.items()
                    if owner == session for output in kept]

    def replace(self, session: str | None, outputs: list[tuple[str, list[int]]]) -> None:
        """The session's outputs become ``outputs`` (``export``'s form, from another process), bounded as ``add``."""
        with self._lock:
            for key in [key for key in self._outputs if key[1] == session]:
                del self._outputs[key]
        for fingerprint, output in outputs:
            self.add(str(fingerprint), session, [int(t) for t in output])

    def corpus(self, fingerprint: str, session: str | None, sep: int) -> np.ndarray:
        """The session's outputs joined, each followed by ``sep`` (none for ``None``)."""
        with self._lock:
            kept = list(self._outputs.get((fingerprint, session), [])) if session is not None else []
        if not kept:
            return np.zeros(0, dtype=np.int32)
        return np.concatenate([np.append(output, np.int32(sep)) for output in kept]).astype(np.int32)


HISTORY = History()
