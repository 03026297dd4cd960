"""The trace's data model: frozen per-round and per-run records (``RoundTrace``, ``RunTrace``), the
settings and totals they carry, and the two estimates every view reads (α̂, acceptance by position).

Per-round probability fields (``q_drafted``, ``p_drafted``, ``p_emitted``, the ``*_top`` lists) hold the
warped distributions the accept rule used; under greedy decoding, where the warp is one-hot, they hold
the models' softmax probabilities at temperature 1 instead, so that confidence stays visible.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from ..gc_pause import gc_paused

SCHEMA = "spec-explorer/trace@2"

# A round's event: what its verification concluded (BiLD: the large model took over / rolled back).
EVENTS = ("target", "no-draft", "all-accepted", "rejected", "fallback", "rollback")
# How each emitted token came to be (the token view colours them so).
EMITTED_KINDS = ("accepted", "corrected", "bonus", "target")
STOP_REASONS = ("eos", "max_new_tokens", "stopped")


@dataclass(frozen=True)
class Timing:
    """Seconds spent in one round, split as the paper's cost model splits them."""

    draft_s: float
    verify_s: float
    other_s: float

    @property
    def total_s(self) -> float:
        return self.draft_s + self.verify_s + self.other_s


@dataclass(frozen=True)
class RoundTrace:
    """One round: draft K tokens, verify them in one target pass, accept a prefix, emit.

    ``emitted`` = the accepted drafts + one token from the target (the correction or the bonus); for
    ``ar`` it is the one target token. ``emitted_kind`` says, per emitted token, which. ``uniforms`` are
    the r_i compared against p/q (sampling only). ``draft_top`` / ``target_top`` list the top
    alternatives ``[id, prob]`` per drafted / verified position (``target_top`` has K + 1 rows);
    ``residual_top`` the top of norm(max(0, p − q)) at a rejection. ``detail`` holds what only one
    method has (BiLD: the fallback and rollback facts).
    """

    index: int
    context_len: int
    drafted: tuple[int, ...]
    q_drafted: tuple[float, ...]
    p_drafted: tuple[float, ...]
    n_accepted: int
    emitted: tuple[int, ...]
    emitted_kind: tuple[str, ...]
    p_emitted: tuple[float, ...]
    event: str
    timing: Timing
    rejected_at: int | None = None
    uniforms: tuple[float, ...] = ()
    draft_top: tuple[tuple[tuple[int, float], ...], ...] = ()
    target_top: tuple[tuple[tuple[int, float], ...], ...] = ()
    residual_top: tuple[tuple[int, float], ...] | None = None
    draft_forwards: int = 0
    target_forwards: int = 1
    controller: dict[str, Any] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)
    # BiTA's token tree (plain data, see ``check_tree``): ``nodes`` [{token, parent (-1: a child of the
    # context), depth, rank, accepted}], ``positions`` [{kind: node|mask, node}], ``attention`` (one 0/1
    # string per position over the positions), ``sees_prompt`` (per position) and ``accepted_path``.
    tree: dict[str, Any] | None = None

    @property
    def tested(self) -> int:
        """Drafts the target judged this round: those it accepted and the one it refused (a rejection, or
        the position of a BiLD rollback); drafts after that one are discarded untested."""
        return self.n_accepted + (self.rejected_at is not None)


def alpha_hat(rounds) -> float | None:
    """α̂ = accepted / tested drafts, the estimate of the acceptance rate α (Leviathan et al., Definition
    3.1): a draft discarded after a rejection was never tested, so it does not count. None without tests."""
    tested = sum(r.tested for r in rounds)
    return sum(r.n_accepted for r in rounds) / tested if tested else None


def acceptance_by_position(rounds) -> tuple[list[int], list[int]]:
    """(tested, accepted) per draft position 1 … the longest draft: a draft is tested when every draft
    before it was accepted (those after a rejection are discarded untested)."""
    most = max((len(r.drafted) for r in rounds), default=0)
    tested, accepted = [0] * most, [0] * most
    for r in rounds:
        for i in range(min(r.tested, len(r.drafted))):
            tested[i] += 1
            accepted[i] += i < r.n_accepted
    return tested, accepted


@dataclass(frozen=True)
class Settings:
    """The knobs a run was decoded with."""

    temperature: float
    top_k: int
    top_p: float
    gamma: int
    controller: str
    seed: int
    max_new_tokens: int
    chat: bool = True
    # the method's own options by name, as its module under explorer/methods defines them (BiLD: α_FB,
    # α_RB, the cap; BiTA: tree, masks, top_k, tokens); empty for a method without options
    options: dict[str, Any] = field(default_factory=dict)
    # whether the method, with these options, may differ from the target's own output (BiLD; lenience
    # below 1; beam's 004 rule); a file written before this field gets it from the method's record
    lossy: bool = False


@dataclass(frozen=True)
class MethodRules:
    """What a trace loader knows of a method beyond the common fields (``explorer.load_trace`` passes
    the registry's): ``check_options(options)`` and ``check_round(round_data, path)`` raise on what the
    method could not have written (``ExplorerError`` or ``untrusted.Refused``, one line);
    ``lossy(options)`` says whether a run with those options is lossy (for files that do not say)."""

    check_options: Callable[[dict], None] | None = None
    check_round: Callable[[dict, str], None] | None = None
    lossy: Callable[[dict], bool] | None = None


@dataclass(frozen=True)
class Summary:
    """Run totals. ``acceptance_rate`` = accepted / drafted; ``alpha_hat`` = accepted / tested drafts
    (a draft after a rejection is discarded untested), the estimate of the paper's α; ``c_measured`` =
    seconds per draft forward / seconds per target forward; ``predicted_speedup`` = Theorem 3.8 at
    (alpha_hat, mean γ, c_measured)."""

    new_tokens: int
    rounds: int
    drafted: int
    accepted: int
    acceptance_rate: float | None
    alpha_hat: float | None
    mean_gamma: float
    tokens_per_target_forward: float | None
    target_forwards: int
    draft_forwards: int
    draft_s: float
    verify_s: float
    other_s: float
    wall_s: float
    tokens_per_s: float | None
    c_measured: float | None
    predicted_speedup: float | None
    record_s: float
    stop_reason: str
    v_d: float | None = None  # EESD eq. 11: accepted drafts / drafted tokens
    r_d: float | None = None  # EESD eq. 12: accepted drafts / output tokens
    hm: float | None = None  # EESD Appendix D: harmonic mean of v_d and r_d
    eq14_speedup: float | None = None  # EESD eq. 14 at (v_d, r_d, c_measured)


@dataclass(frozen=True)
class RunTrace:
    """A whole run: what was asked, what came out, every round and the totals."""

    method: str
    model: str
    draft: str | None
    settings: Settings
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    text: str
    rounds: tuple[RoundTrace, ...]
    summary: Summary
    prompt: str | None = None
    draft_about: str | None = None  # which draft in words (e.g. the trained exit layer's file)
    device: str = "cpu"
    dtype: str = "float32"
    token_text: dict[int, str] = field(default_factory=dict)
    # the machine's pace while the run decoded (``explorer.pace``: a fixed test's ms at the start, between
    # rounds, at the end), where it was watched; empty otherwise. Two runs are comparable only if it held.
    pace_ms: tuple[float, ...] = ()
    schema: str = SCHEMA

    # -- JSON ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = _plain(self)
        d["token_text"] = {str(k): v for k, v in self.token_text.items()}  # JSON keys are strings
        return d

    def to_json(self, indent: int | None = None) -> str:
        """The trace as JSON; compact unless ``indent`` (a compact upload downloads again no larger). Written with
        the garbage collector paused (``gc_pause``: a 4 096-round trace is millions of small objects)."""
        separators = (",", ":") if indent is None else None
        with gc_paused():
            return json.dumps(self.to_dict(), indent=indent, separators=separators, allow_nan=False, default=_finite)


def _plain(obj):
    """``dataclasses.asdict`` without its ``copy.deepcopy`` of every leaf (a trace's leaves are numbers, strings
    and None): new dicts, lists and tuples all the way down, so the result shares nothing mutable with the trace.
    A trace of 4 096 rounds went to JSON in ≈ 1 s, two thirds of it in deep copies."""
    kind = type(obj)
    if kind in _LEAVES:
        return obj
    if kind is list or kind is tuple:
        return kind([_plain(v) for v in obj])
    if kind is dict:
        return {k: _plain(v) for k, v in obj.items()}
    names = _FIELDS.get(kind)
    if names is None and dataclasses.is_dataclass(kind):
        names = _FIELDS.setdefault(kind, tuple(f.name for f in dataclasses.fields(kind)))
    if names is not None:
        return {name: _plain(getattr(obj, name)) for name in names}
    if isinstance(obj, (list, tuple)):  # a subclass (a named tuple keeps its own type, as asdict keeps it)
        return kind(*[_plain(v) for v in obj]) if hasattr(obj, "_fields") else kind([_plain(v) for v in obj])
    if isinstance(obj, dict):
        return kind((k, _plain(v)) for k, v in obj.items())
    return obj


_LEAVES = {int, float, str, bool, type(None)}
_FIELDS: dict[type, tuple[str, ...]] = {}


def _finite(obj):
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")
