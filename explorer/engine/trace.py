"""The trace: frozen per-round and per-run records, the product's data model.

A decode emits one ``RoundTrace`` per round and ends in a ``RunTrace``. Both are plain data (ints,
floats, strings, short tuples and small dicts) so that the UI, the plots, the CLI, the benchmark and the
tests read them without touching a model, and so that a run saved as JSON replays anywhere.

JSON carries ``"schema": "spec-explorer/trace@1"``; ``RunTrace.from_json`` validates it and raises
``TraceFormatError`` with one readable line for a malformed or foreign file (never pickle).

Per-round probability fields (``q_drafted``, ``p_drafted``, ``p_emitted``, the ``*_top`` lists) hold the
warped distributions the accept rule used; under greedy decoding, where the warp is one-hot, they hold
the models' softmax probabilities at temperature 1 instead, so that confidence stays visible.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import TraceFormatError

SCHEMA = "spec-explorer/trace@1"

# A round's event: what its verification concluded (BiLD: the large model took over / rolled back).
EVENTS = ("target", "no-draft", "all-accepted", "rejected", "fallback", "rollback")
# How each emitted token came to be (the token view colours them so).
EMITTED_KINDS = ("accepted", "corrected", "bonus", "target")


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
    fallback_threshold: float | None = None  # BiLD's α_FB
    rollback_threshold: float | None = None  # BiLD's α_RB (None: no rollback)
    max_small_steps: int | None = None  # BiLD's cap on a small-model turn


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
    schema: str = SCHEMA

    # -- JSON ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["token_text"] = {str(k): v for k, v in self.token_text.items()}  # JSON keys are strings
        return d

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False, default=_finite)

    @classmethod
    def from_json(cls, text: str | bytes) -> "RunTrace":
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise TraceFormatError(f"not a trace file: invalid JSON ({err.msg if hasattr(err, 'msg') else err})") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> "RunTrace":
        if not isinstance(data, dict):
            raise TraceFormatError("not a trace file: the JSON is not an object")
        schema = data.get("schema")
        if schema != SCHEMA:
            found = f"schema {schema!r}" if schema else "no schema field"
            raise TraceFormatError(f"not a spec-explorer trace ({found}; expected {SCHEMA!r})")
        try:
            fields = dict(data)
            fields["settings"] = _build(Settings, fields["settings"])
            fields["summary"] = _build(Summary, fields["summary"])
            fields["rounds"] = tuple(_round_from_dict(r) for r in _list(fields["rounds"], "rounds"))
            fields["prompt_ids"] = _ints(fields["prompt_ids"], "prompt_ids")
            fields["output_ids"] = _ints(fields["output_ids"], "output_ids")
            fields["token_text"] = {int(k): str(v) for k, v in dict(fields.get("token_text", {})).items()}
            trace = _build(cls, fields)
        except KeyError as err:
            raise TraceFormatError(f"malformed trace: missing field {err.args[0]!r}") from None
        except (TypeError, ValueError) as err:
            raise TraceFormatError(f"malformed trace: {err}") from None
        problems = check_invariants(trace)
        if problems:
            raise TraceFormatError(f"inconsistent trace: {problems[0]}")
        return trace


def check_invariants(trace: RunTrace) -> list[str]:
    """What must hold in every trace; returns the violations (empty when sound)."""
    problems = []
    emitted = [t for r in trace.rounds for t in r.emitted]
    if tuple(emitted) != tuple(trace.output_ids):
        problems.append("the rounds' emitted tokens do not concatenate to output_ids")
    context = len(trace.prompt_ids)
    for r in trace.rounds:
        where = f"round {r.index}"
        if r.event not in EVENTS:
            problems.append(f"{where}: unknown event {r.event!r}")
        if any(k not in EMITTED_KINDS for k in r.emitted_kind):
            problems.append(f"{where}: unknown emitted kind")
        if not 0 <= r.n_accepted <= len(r.drafted):
            problems.append(f"{where}: accepted {r.n_accepted} of {len(r.drafted)} drafted")
        if tuple(r.emitted[: r.n_accepted]) != tuple(r.drafted[: r.n_accepted]):
            problems.append(f"{where}: accepted tokens differ from the drafted ones")
        if not (len(r.q_drafted) == len(r.p_drafted) == len(r.drafted)):
            problems.append(f"{where}: q_drafted / p_drafted do not match drafted")
        if not (len(r.emitted_kind) == len(r.p_emitted) == len(r.emitted)):
            problems.append(f"{where}: emitted_kind / p_emitted do not match emitted")
        if r.tree is not None and [r.tree["nodes"][i]["token"] for i in r.tree["accepted_path"]][: r.n_accepted] \
                != list(r.emitted[: r.n_accepted]):
            problems.append(f"{where}: the tree's accepted path differs from the emitted tokens")
        if r.context_len != context:
            problems.append(f"{where}: context_len {r.context_len}, expected {context}")
        context += len(r.emitted)
    s = trace.summary
    if s.new_tokens != len(trace.output_ids) or s.rounds != len(trace.rounds):
        problems.append("summary counts differ from the rounds")
    if s.drafted != sum(len(r.drafted) for r in trace.rounds):
        problems.append("summary.drafted differs from the rounds")
    if s.accepted != sum(r.n_accepted for r in trace.rounds):
        problems.append("summary.accepted differs from the rounds")
    if s.target_forwards != sum(r.target_forwards for r in trace.rounds):
        problems.append("summary.target_forwards differs from the rounds")
    return problems


def check_tree(tree: Any) -> str | None:
    """What is wrong with a round's ``tree`` (BiTA), or None when it is sound."""
    if not isinstance(tree, dict):
        return "not an object"
    nodes, positions = tree.get("nodes"), tree.get("positions")
    attention, sees, path = tree.get("attention"), tree.get("sees_prompt"), tree.get("accepted_path")
    if not all(isinstance(x, list) for x in (nodes, positions, attention, sees, path)):
        return "nodes, positions, attention, sees_prompt and accepted_path must be lists"
    whole = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
    for i, n in enumerate(nodes):
        if not isinstance(n, dict) or not all(whole(n.get(k)) for k in ("token", "parent", "depth", "rank")) \
                or not isinstance(n.get("accepted"), bool):
            return f"node {i} needs whole token, parent, depth, rank and a boolean accepted"
        if not -1 <= n["parent"] < i or n["depth"] != (1 if n["parent"] < 0 else nodes[n["parent"]]["depth"] + 1):
            return f"node {i} has a bad parent or depth"
    for i, pos in enumerate(positions):
        if not isinstance(pos, dict) or pos.get("kind") not in ("node", "mask") or not whole(pos.get("node")) \
                or not (0 if pos["kind"] == "node" else -1) <= pos["node"] < len(nodes):
            return f"position {i} needs kind node|mask and the index of its node"
    t = len(positions)
    if len(attention) != t or any(not isinstance(a, str) or len(a) != t or set(a) - {"0", "1"} for a in attention):
        return f"attention must hold {t} strings of {t} 0/1 characters"
    if len(sees) != t or not all(isinstance(v, bool) for v in sees):
        return f"sees_prompt must hold {t} booleans"
    if not all(whole(i) and 0 <= i < len(nodes) for i in path) \
            or any(nodes[b]["parent"] != a for a, b in zip([-1] + path, path)):
        return "accepted_path must run from the context down the tree"
    if {i for i, n in enumerate(nodes) if n["accepted"]} != set(path):
        return "the nodes marked accepted differ from accepted_path"
    return None


# -- helpers ----------------------------------------------------------------------------------------


def _finite(obj):
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _list(value, name):
    if not isinstance(value, list):
        raise TypeError(f"{name} must be a list")
    return value


def _ints(value, name) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise TypeError(f"{name} must be a list of token ids")
    return tuple(value)


def _build(cls, data):
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__.lower()} must be an object")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise TypeError(f"unknown field(s) {sorted(unknown)} in {cls.__name__}")
    missing = [f.name for f in dataclasses.fields(cls)
               if f.name not in data and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise KeyError(missing[0])
    return cls(**data)


def _pairs(rows) -> tuple:
    return tuple((int(i), float(p)) for i, p in rows)


def _round_from_dict(data) -> RoundTrace:
    if not isinstance(data, dict):
        raise TypeError("each round must be an object")
    d = dict(data)
    d["timing"] = _build(Timing, d.get("timing"))
    for name in ("drafted", "emitted"):
        d[name] = _ints(d.get(name), name)
    for name in ("q_drafted", "p_drafted", "p_emitted", "uniforms"):
        d[name] = tuple(float(x) for x in d.get(name, ()))
    d["emitted_kind"] = tuple(str(x) for x in d.get("emitted_kind", ()))
    d["draft_top"] = tuple(_pairs(rows) for rows in d.get("draft_top", ()))
    d["target_top"] = tuple(_pairs(rows) for rows in d.get("target_top", ()))
    if d.get("residual_top") is not None:
        d["residual_top"] = _pairs(d["residual_top"])
    if d.get("tree") is not None:
        problem = check_tree(d["tree"])
        if problem:
            raise ValueError(f"round {d.get('index')}: tree: {problem}")
    for name in ("controller", "detail"):
        if not isinstance(d.get(name, {}), dict):
            raise TypeError(f"{name} must be an object")
    return _build(RoundTrace, d)

