"""The trace: frozen per-round and per-run records, the product's data model.

A decode emits one ``RoundTrace`` per round and ends in a ``RunTrace``. Both are plain data (ints,
floats, strings, short tuples and small dicts) so that the UI, the plots, the CLI, the benchmark and the
tests read them without touching a model, and so that a run saved as JSON replays anywhere.

JSON carries ``"schema": "spec-explorer/trace@2"`` (``@1`` files, before the method registry, still load:
their BiLD thresholds move into ``settings.options``); ``RunTrace.from_json`` validates it and raises
``TraceFormatError`` with one readable line for a malformed or foreign file (never pickle). A trace file
is untrusted (strangers share them): every field is checked against what the engine can write (the
kinds below; the bounds live in ``limits``), the free-form ``controller`` and ``detail`` objects must be
plain, bounded JSON, and the keys of them that the views read must hold what the views expect, so that
no view fails on a forged value.

Per-round probability fields (``q_drafted``, ``p_drafted``, ``p_emitted``, the ``*_top`` lists) hold the
warped distributions the accept rule used; under greedy decoding, where the warp is one-hot, they hold
the models' softmax probabilities at temperature 1 instead, so that confidence stays visible.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .. import limits
from ..errors import ExplorerError, TraceFormatError
from ..limits import (MAX_FREE_VALUES, MAX_GAMMA, MAX_JSON_DEPTH, MAX_NAME_CHARS, MAX_PIECE_CHARS, MAX_PROMPT_CHARS,
                      MAX_SEED, MAX_TOKEN_ID, MAX_TRACE_SECONDS, MAX_TRACE_TOKENS, MAX_TRACE_TOP, MAX_TREE_POSITIONS,
                      MAX_TREE_PROMPT, clip)
from ..untrusted import (BOOL, FINITE, LIST, OBJECT, Kind, ListOf, MapOf, Maybe, Record, Refused, check_plain, number,
                         one_of, parse, text, whole)

SCHEMA = "spec-explorer/trace@2"
SCHEMA_V1 = "spec-explorer/trace@1"  # settings had BiLD's three thresholds as fields; no options
V1_OPTIONS = ("fallback_threshold", "rollback_threshold", "max_small_steps")

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


@dataclass(frozen=True)
class MethodRules:
    """What a trace loader knows of a method beyond the common fields (``explorer.load_trace`` passes
    the registry's): ``check_options(options)`` and ``check_round(round_data, path)`` raise on what the
    method could not have written (``ExplorerError`` or ``untrusted.Refused``, one line)."""

    check_options: Callable[[dict], None] | None = None
    check_round: Callable[[dict, str], None] | None = None


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
        """The trace as JSON; compact unless ``indent`` (a compact upload downloads again no larger)."""
        separators = (",", ":") if indent is None else None
        return json.dumps(self.to_dict(), indent=indent, separators=separators, allow_nan=False, default=_finite)

    @classmethod
    def from_json(cls, text: str | bytes, methods: Mapping[str, MethodRules] | None = None) -> "RunTrace":
        """A trace from its JSON file, every field checked (``TraceFormatError``, one line, otherwise);
        ``methods``: the methods to accept and their own rules (``explorer.load_trace`` passes the
        registry's); None accepts any method name and checks only the common fields."""
        try:
            data = parse(text, limits.MAX_TRACE_BYTES)
        except Refused as err:
            raise TraceFormatError(f"not a trace file: {err}") from None
        return cls.from_dict(data, methods)

    @classmethod
    def from_dict(cls, data: Any, methods: Mapping[str, MethodRules] | None = None) -> "RunTrace":
        """A trace from parsed JSON data, checked as ``from_json`` checks a file."""
        if not isinstance(data, dict):
            raise TraceFormatError("not a trace file: the JSON is not an object")
        schema = data.get("schema")
        if schema not in (SCHEMA, SCHEMA_V1):
            found = f"schema {clip(schema)}" if schema else "no schema field"
            raise TraceFormatError(f"not a spec-explorer trace ({found}; expected {SCHEMA!r})")
        if schema == SCHEMA_V1:
            data = _from_v1(data)
        _check_size(data)
        try:
            trace = _read_trace(data, methods)
        except Refused as err:
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
    for i, r in enumerate(trace.rounds):
        where = f"round {i}"
        if r.index != i:
            problems.append(f"{where}: index {clip(r.index)}, expected {i} (rounds in order)")
        if r.event not in EVENTS:
            problems.append(f"{where}: unknown event {clip(r.event)}")
        if any(k not in EMITTED_KINDS for k in r.emitted_kind):
            problems.append(f"{where}: unknown emitted kind")
        if not 0 <= r.n_accepted <= len(r.drafted):
            problems.append(f"{where}: accepted {r.n_accepted} of {len(r.drafted)} drafted")
        if tuple(r.emitted[: r.n_accepted]) != tuple(r.drafted[: r.n_accepted]):
            problems.append(f"{where}: accepted tokens differ from the drafted ones")
        if r.emitted_kind[: r.n_accepted] != ("accepted",) * r.n_accepted or len(r.emitted) > r.n_accepted + 1 \
                or "accepted" in r.emitted_kind[r.n_accepted:]:
            problems.append(f"{where}: emitted must be the accepted drafts and at most one token of the target's")
        if r.rejected_at is not None and not 0 <= r.rejected_at < len(r.drafted):
            problems.append(f"{where}: rejected_at {r.rejected_at} is not a drafted position")
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


# -- what an uploaded trace may hold -------------------------------------------------------------------
# Each kind is what the engine can write, with room to spare (the bounds are in ``limits``). A draft is
# at most MAX_GAMMA tokens (γ, BiLD's small-model turn and BiTA's tree depth are all capped there), so a
# round emits at most MAX_GAMMA + 1 and lists at most that many rows of alternatives.

COUNT = whole(0, 2**31 - 1)  # a count or a length: beyond any trace, small enough to print
ID = whole(0, MAX_TOKEN_ID, f"a token id (a whole number from 0 to {MAX_TOKEN_ID})")
PROB = number(0, 1, "a probability (a number from 0 to 1)")
RATIO = number(0, 1e12)  # a rate, speed-up, cost ratio or Beta count: finite, and short when printed
SECONDS = number(0, MAX_TRACE_SECONDS, f"seconds (a number from 0 to {MAX_TRACE_SECONDS:g})")
NAME = text(MAX_NAME_CHARS)
GAMMA = whole(0, MAX_GAMMA)
NODE_INDEX = whole(-1, MAX_TREE_POSITIONS - 1)  # -1: the context
# calibrated TS's posterior: μ mixes θ_M and θ̂, both in [0, 1] (rounding may step an ulp past); σ is about
# 0.5/√n after n verifications, never tiny (the density drawn would overflow)
MEAN = number(-1, 2)
SIGMA = Kind("a standard deviation (0, or a number from 1e-06 to 1)", lambda v: PROB.ok(v) and (v == 0 or v >= 1e-6))


def _ids(most: int) -> ListOf:
    return ListOf(ID, most, f"a list of at most {most} token ids")


def _probs(most: int) -> ListOf:
    return ListOf(PROB, most, f"a list of at most {most} probabilities (numbers from 0 to 1)")


def _per_step(kind: Kind, words: str) -> ListOf:
    """One value per draft step (the Thompson-sampling controllers' records)."""
    return ListOf(kind, MAX_GAMMA + 1, f"a list of at most {MAX_GAMMA + 1} {words}")


def _required(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls)
                 if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)


PAIR = Kind("a [token id, probability] pair",
            lambda v: isinstance(v, (list, tuple)) and len(v) == 2 and ID.ok(v[0]) and PROB.ok(v[1]))
TOP = ListOf(PAIR, MAX_TRACE_TOP, f"a list of at most {MAX_TRACE_TOP} [token id, probability] pairs")
TOPS = ListOf(TOP, MAX_GAMMA + 1, f"a list of at most {MAX_GAMMA + 1} lists of [token id, probability] pairs")
# token_text's keys are ids written in decimal (JSON keys are strings); a Python caller may pass ints
TOKEN_KEY = Kind("a token id in decimal digits", lambda k: ID.ok(k) or (
    isinstance(k, str) and 0 < len(k) <= 10 and k.isascii() and k.isdigit() and str(int(k)) == k and ID.ok(int(k))))

SETTINGS = Record({
    "temperature": number(0, 100), "top_k": COUNT, "top_p": number(0, 1), "gamma": GAMMA, "controller": NAME,
    "seed": whole(0, MAX_SEED), "max_new_tokens": COUNT, "chat": BOOL, "options": MapOf(
        text(64), Kind("null, true/false, a finite number or a short text", lambda v: v is None or BOOL.ok(v) or
                       FINITE.ok(v) or (isinstance(v, str) and len(v) <= MAX_NAME_CHARS)),
        64, "an object of at most 64 option values"),
}, _required(Settings))
SUMMARY = Record({
    "new_tokens": COUNT, "rounds": COUNT, "drafted": COUNT, "accepted": COUNT, "acceptance_rate": Maybe(PROB),
    "alpha_hat": Maybe(PROB), "mean_gamma": number(0, MAX_GAMMA), "tokens_per_target_forward": Maybe(RATIO),
    "target_forwards": COUNT, "draft_forwards": COUNT, "draft_s": SECONDS, "verify_s": SECONDS, "other_s": SECONDS,
    "wall_s": SECONDS, "tokens_per_s": Maybe(RATIO), "c_measured": Maybe(RATIO), "predicted_speedup": Maybe(RATIO),
    "record_s": SECONDS, "stop_reason": one_of(STOP_REASONS), "v_d": Maybe(PROB), "r_d": Maybe(PROB),
    "hm": Maybe(PROB), "eq14_speedup": Maybe(RATIO),
}, _required(Summary))
TIMING = Record({"draft_s": SECONDS, "verify_s": SECONDS, "other_s": SECONDS}, _required(Timing))
ROUND = Record({
    "index": COUNT, "context_len": COUNT, "drafted": _ids(MAX_GAMMA), "q_drafted": _probs(MAX_GAMMA),
    "p_drafted": _probs(MAX_GAMMA), "n_accepted": COUNT, "emitted": _ids(MAX_GAMMA + 1),
    "emitted_kind": ListOf(one_of(EMITTED_KINDS), MAX_GAMMA + 1, f"a list of at most {MAX_GAMMA + 1} emitted kinds"),
    "p_emitted": _probs(MAX_GAMMA + 1), "event": one_of(EVENTS), "timing": TIMING, "rejected_at": Maybe(GAMMA),
    "uniforms": _probs(MAX_GAMMA + 1), "draft_top": TOPS, "target_top": TOPS, "residual_top": Maybe(TOP),
    "draft_forwards": COUNT, "target_forwards": COUNT, "controller": OBJECT, "detail": OBJECT, "tree": Maybe(OBJECT),
}, _required(RoundTrace))
TRACE = Record({
    "schema": one_of((SCHEMA,)), "method": NAME, "model": NAME, "draft": Maybe(NAME), "settings": SETTINGS,
    "prompt_ids": ListOf(ID, MAX_TRACE_TOKENS, "a list of token ids"),
    "output_ids": ListOf(ID, MAX_TRACE_TOKENS, "a list of token ids"),
    "text": text(MAX_PIECE_CHARS * MAX_TRACE_TOKENS), "rounds": LIST, "summary": SUMMARY,
    "prompt": Maybe(text(MAX_PROMPT_CHARS)), "draft_about": Maybe(NAME), "device": NAME, "dtype": NAME,
    # one entry per distinct id: at most a vocabulary (the largest common ones hold 256 000)
    "token_text": MapOf(TOKEN_KEY, text(MAX_PIECE_CHARS), 2**18, "an object from token ids to their text"),
}, _required(RunTrace))

# The keys of a round's ``controller`` and ``detail`` that the views read (``viz/views``), wherever they
# appear; any other key need only be plain JSON. Controllers: ``engine/controllers.py``; BiLD's and
# BiTA's details: ``engine/bild.py``, ``methods/bita/tree.py``; the feature head's: ``methods/eagle/drafter.py``.
CONTROLLER = Record({
    "kind": NAME, "evidence": NAME, "gamma": GAMMA, "gamma_before": GAMMA, "gamma_after": GAMMA,
    "alpha_before": Maybe(RATIO), "beta_before": Maybe(RATIO), "alpha_after": Maybe(RATIO),
    "beta_after": Maybe(RATIO), "r": COUNT, "n": COUNT, "c": Maybe(RATIO), "priced": BOOL,
    "opening_theta": Maybe(PROB), "theta": _per_step(PROB, "probabilities"),
    "continue": _per_step(BOOL, "true/false decisions"), "theta_model": _per_step(PROB, "probabilities"),
    "mu": _per_step(MEAN, "posterior means"), "sigma": _per_step(SIGMA, "standard deviations (0, or 1e-06 to 1)"),
    "theta_hat": PROB, "theta_hat_after": PROB, "verify_ratio": _per_step(RATIO, "cost ratios"),
    "alpha_hat": PROB, "gamma_continuous": number(0, MAX_GAMMA), "objective": RATIO,
    "ascent": ListOf(number(0, MAX_GAMMA), 128, "a list of at most 128 draft lengths"),
}, strict=False)
ROLLBACK = Record({"position": GAMMA, "distance": RATIO, "replaced": ID, "replacement": ID, "flushed": GAMMA},
                  ("position", "distance", "replaced", "replacement", "flushed"), strict=False)
DETAIL = Record({
    "reason": one_of(("confidence", "end", "cap")), "small_max_prob": Maybe(PROB), "fallback_threshold": Maybe(PROB),
    "rollback_threshold": Maybe(RATIO), "rollback": Maybe(ROLLBACK), "large_pass": BOOL,
    "tree": NAME, "masks": COUNT, "top_k": COUNT, "tokens": NAME, "input_positions": COUNT, "nodes": COUNT,
    "lenience": number(0.01, 1), "lenient_accepts": ListOf(whole(0, MAX_GAMMA), MAX_GAMMA, "a list of draft positions"),
    "feature_cos": ListOf(number(-1, 1), MAX_GAMMA, "a list of cosine similarities"),
}, strict=False)
FREE_DEPTH = MAX_JSON_DEPTH - 3  # a round's controller or detail sits under the trace, its rounds and the round

NODE = Record({"token": ID, "parent": NODE_INDEX, "depth": whole(1, MAX_GAMMA), "rank": whole(0, MAX_TREE_POSITIONS),
               "accepted": BOOL, "q": PROB, "p": Maybe(PROB)}, ("token", "parent", "depth", "rank", "accepted"))
POSITION = Record({"kind": one_of(("node", "mask")), "node": NODE_INDEX, "slot": whole(0, MAX_TREE_POSITIONS),
                   "offset": whole(0, MAX_TREE_POSITIONS)}, ("kind", "node"))
TREE = Record({
    "kind": NAME, "masks": whole(0, MAX_TREE_POSITIONS), "top_k": whole(0, MAX_TREE_POSITIONS),
    "prompt_tokens": whole(0, MAX_TREE_PROMPT), "context_inputs": COUNT,
    "nodes": ListOf(NODE, MAX_TREE_POSITIONS, f"a list of at most {MAX_TREE_POSITIONS} nodes"),
    "positions": ListOf(POSITION, MAX_TREE_POSITIONS, f"a list of at most {MAX_TREE_POSITIONS} positions"),
    "attention": ListOf(Kind("a string of 0s and 1s", lambda a: isinstance(a, str) and not a.strip("01")),
                        MAX_TREE_POSITIONS, f"a list of at most {MAX_TREE_POSITIONS} strings of 0s and 1s"),
    "sees_prompt": ListOf(BOOL, MAX_TREE_POSITIONS, f"a list of at most {MAX_TREE_POSITIONS} true/false values"),
    "accepted_path": ListOf(whole(0, MAX_TREE_POSITIONS - 1), MAX_GAMMA, f"a list of at most {MAX_GAMMA} node indices"),
    "next_group": Maybe(NODE_INDEX),
}, ("nodes", "positions", "attention", "sees_prompt", "accepted_path"))


def check_tree(tree: Any) -> str | None:
    """What is wrong with a round's ``tree`` (BiTA), or None when it is sound: each field of its kind
    (``TREE``), parents before children at depth + 1 (so the tree is at most MAX_GAMMA deep), positions
    naming nodes, a square 0/1 attention mask, an accepted path down the tree, and ``next_group`` (the
    node whose mask group drafts next; -1 the context's) one of the nodes."""
    return _tree_problem(tree, "tree")


def _tree_problem(tree: Any, path: str) -> str | None:
    if not TREE.ok(tree):
        return TREE.explain(tree, path)
    nodes, positions = tree["nodes"], tree["positions"]
    attention, sees, accepted = tree["attention"], tree["sees_prompt"], tree["accepted_path"]
    for i, n in enumerate(nodes):
        if not n["parent"] < i or n["depth"] != (1 if n["parent"] < 0 else nodes[n["parent"]]["depth"] + 1):
            return f"{path}: node {i} has a bad parent or depth"
    for i, pos in enumerate(positions):
        if not (0 if pos["kind"] == "node" else -1) <= pos["node"] < len(nodes):
            return f"{path}: position {i} needs kind node|mask and the index of its node"
    t = len(positions)
    if len(attention) != t or any(len(a) != t for a in attention):
        return f"{path}: attention must hold {t} strings of {t} 0/1 characters"
    if len(sees) != t:
        return f"{path}: sees_prompt must hold {t} booleans"
    if any(i >= len(nodes) for i in accepted) \
            or any(nodes[b]["parent"] != a for a, b in zip([-1] + accepted, accepted)):
        return f"{path}: accepted_path must run from the context down the tree"
    if {i for i, n in enumerate(nodes) if n["accepted"]} != set(accepted):
        return f"{path}: the nodes marked accepted differ from accepted_path"
    if tree.get("next_group") is not None and tree["next_group"] >= len(nodes):
        return f"{path}: next_group {tree['next_group']} is not one of the {len(nodes)} nodes (nor -1, the context)"
    return None


# -- helpers ----------------------------------------------------------------------------------------


def _finite(obj):
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _check_size(data: dict) -> None:
    """Refuse a trace beyond the caps on rounds and tokens before reading any of it."""
    rounds, tokens = data.get("rounds"), [data.get("prompt_ids"), data.get("output_ids")]
    if isinstance(rounds, (list, tuple)) and len(rounds) > limits.MAX_TRACE_ROUNDS:
        raise TraceFormatError(f"trace too large: {len(rounds)} rounds; at most {limits.MAX_TRACE_ROUNDS} are "
                               "allowed (EXPLORER_MAX_TRACE_ROUNDS)")
    n = sum(len(ids) for ids in tokens if isinstance(ids, (list, tuple)))
    if n > limits.MAX_TRACE_TOKENS:
        raise TraceFormatError(f"trace too large: {n} prompt + output tokens; at most {limits.MAX_TRACE_TOKENS} "
                               "are allowed (EXPLORER_MAX_TRACE_TOKENS)")


def _from_v1(data: dict) -> dict:
    """A ``@1`` trace as ``@2``: BiLD's thresholds leave the settings for ``settings.options``."""
    settings = data.get("settings")
    if not isinstance(settings, dict):
        return {**data, "schema": SCHEMA}  # the checks that follow say what is wrong
    settings = dict(settings)
    moved = {k: settings.pop(k) for k in V1_OPTIONS if k in settings}
    settings["options"] = moved if data.get("method") == "bild" else {}
    return {**data, "schema": SCHEMA, "settings": settings}


def _read_trace(data: dict, methods: Mapping[str, MethodRules] | None) -> RunTrace:
    TRACE.check(data, "")
    rules = MethodRules()
    if methods is not None:
        if data["method"] not in methods:
            raise Refused(f"method must be one of {', '.join(methods)}, got {clip(data['method'])}")
        rules = methods[data["method"]]
    if rules.check_options is not None:
        try:
            rules.check_options(data["settings"].get("options", {}))
        except ExplorerError as err:
            raise Refused(f"settings.options: {err}") from None
    fields = dict(data)
    fields["settings"] = Settings(**data["settings"])
    fields["summary"] = Summary(**data["summary"])
    fields["rounds"] = tuple(_read_round(r, f"rounds[{i}]", rules.check_round) for i, r in enumerate(data["rounds"]))
    _check_steps(fields["rounds"], data["settings"]["gamma"])
    fields["prompt_ids"] = tuple(data["prompt_ids"])
    fields["output_ids"] = tuple(data["output_ids"])
    fields["token_text"] = {int(k): v for k, v in data.get("token_text", {}).items()}
    return RunTrace(**fields)


PER_STEP = ("theta", "continue", "theta_model", "mu", "sigma", "verify_ratio")


def _check_steps(rounds, gamma: int) -> None:
    """A controller decides once per draft step: at most γ + 1 decisions a round (the last one may stop),
    whatever a forged file says (65 θ a round over 4 096 rounds made a view take 45 s a step)."""
    for r in rounds:
        for key in PER_STEP:
            values = r.controller.get(key)
            if values is not None and len(values) > gamma + 1:
                raise Refused(f"rounds[{r.index}].controller.{key} has {len(values)} values; a run with γ = {gamma} "
                              f"makes at most {gamma + 1} draft-step decisions a round")


def _read_round(data: Any, path: str, check_round: Callable[[dict, str], None] | None = None) -> RoundTrace:
    ROUND.check(data, path)
    for name, keys in (("controller", CONTROLLER), ("detail", DETAIL)):
        free = data.get(name, {})
        keys.check(free, f"{path}.{name}")
        check_plain(free, f"{path}.{name}", MAX_FREE_VALUES, FREE_DEPTH, MAX_NAME_CHARS)
    if check_round is not None:
        try:
            check_round(data, path)
        except ExplorerError as err:
            raise Refused(str(err)) from None
    problem = _tree_problem(data["tree"], f"{path}.tree") if data.get("tree") is not None else None
    if problem:
        raise Refused(problem)
    d = dict(data)
    d["timing"] = Timing(**data["timing"])
    for name in ("drafted", "emitted", "emitted_kind"):
        d[name] = tuple(data[name])
    for name in ("q_drafted", "p_drafted", "p_emitted", "uniforms"):
        d[name] = tuple(map(float, data.get(name, ())))
    d["draft_top"] = tuple(map(_pairs, data.get("draft_top", ())))
    d["target_top"] = tuple(map(_pairs, data.get("target_top", ())))
    if data.get("residual_top") is not None:
        d["residual_top"] = _pairs(data["residual_top"])
    return RoundTrace(**d)


def _pairs(rows) -> tuple:
    return tuple((int(i), float(p)) for i, p in rows)
