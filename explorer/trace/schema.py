"""What an uploaded trace may hold: every field of its kind (the bounds live in ``limits``), the
free-form ``controller`` and ``detail`` objects plain, bounded JSON, and the keys of them that the views
read of the kinds the views expect, so that no view fails on a forged value. A method's and a draft's own
``detail`` keys are declared by their records (``explorer.methods``, ``explorer.drafts``) and reach the
reader as ``MethodRules``; the kinds below are theirs to use too (``ID``, ``PROB``, ``GAMMA``, …).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from .. import limits
from ..errors import ExplorerError, TraceFormatError
from ..limits import (MAX_FREE_VALUES, MAX_GAMMA, MAX_JSON_DEPTH, MAX_NAME_CHARS, MAX_PACE_SAMPLES, MAX_PIECE_CHARS,
                      MAX_PROMPT_CHARS, MAX_SEED, MAX_TOKEN_ID, MAX_TRACE_SECONDS, MAX_TRACE_TOKENS, MAX_TRACE_TOP,
                      MAX_TREE_POSITIONS, MAX_TREE_PROMPT, clip)
from ..untrusted import (BOOL, FINITE, LIST, OBJECT, Kind, ListOf, MapOf, Maybe, Record, Refused, check_plain, number,
                         one_of, text, whole)
from .model import (EMITTED_KINDS, EVENTS, SCHEMA, STOP_REASONS, MethodRules, RoundTrace, RunTrace, Settings, Summary,
                    Timing)

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
        64, "an object of at most 64 option values"), "lossy": BOOL,
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
    "pace_ms": ListOf(number(0, 1e6), MAX_PACE_SAMPLES, f"a list of at most {MAX_PACE_SAMPLES} times in ms"),
}, _required(RunTrace))

# The keys of a round's ``controller`` that the views read (``viz/views``), wherever they appear
# (``engine/controllers.py``); any other key need only be plain JSON. A round's ``detail`` is its
# method's and its draft's: their records declare the keys their views read (``Method.detail``,
# ``DraftKind.detail``), checked through the loader's ``MethodRules``.
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
    "unsure": PROB, "floor": PROB,
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



def check_size(data: dict) -> None:
    """Refuse a trace beyond the caps on rounds and tokens before reading any of it."""
    rounds, tokens = data.get("rounds"), [data.get("prompt_ids"), data.get("output_ids")]
    if isinstance(rounds, (list, tuple)) and len(rounds) > limits.MAX_TRACE_ROUNDS:
        raise TraceFormatError(f"trace too large: {len(rounds)} rounds; at most {limits.MAX_TRACE_ROUNDS} are "
                               "allowed (EXPLORER_MAX_TRACE_ROUNDS)")
    n = sum(len(ids) for ids in tokens if isinstance(ids, (list, tuple)))
    if n > limits.MAX_TRACE_TOKENS:
        raise TraceFormatError(f"trace too large: {n} prompt + output tokens; at most {limits.MAX_TRACE_TOKENS} "
                               "are allowed (EXPLORER_MAX_TRACE_TOKENS)")



def read_trace(data: dict, methods: Mapping[str, MethodRules] | None) -> RunTrace:
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
    settings = dict(data["settings"])
    if "lossy" not in settings and rules.lossy is not None:
        settings["lossy"] = rules.lossy(settings.get("options", {}))
    fields["settings"] = Settings(**settings)
    fields["summary"] = Summary(**data["summary"])
    fields["rounds"] = tuple(_read_round(r, f"rounds[{i}]", rules.check_round) for i, r in enumerate(data["rounds"]))
    _check_steps(fields["rounds"], data["settings"]["gamma"])
    fields["prompt_ids"] = tuple(data["prompt_ids"])
    fields["output_ids"] = tuple(data["output_ids"])
    fields["token_text"] = {int(k): v for k, v in data.get("token_text", {}).items()}
    fields["pace_ms"] = tuple(map(float, data.get("pace_ms", ())))
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
    CONTROLLER.check(data.get("controller", {}), f"{path}.controller")
    for name in ("controller", "detail"):
        check_plain(data.get(name, {}), f"{path}.{name}", MAX_FREE_VALUES, FREE_DEPTH, MAX_NAME_CHARS)
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

