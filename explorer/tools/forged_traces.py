"""Forged traces: real tiny runs made into the largest, widest or oversized traces a file may hold, for the
adversarial soak (``soak_adversarial``) and the tests of what an upload may do (``tests/test_trace_security.py``,
``tests/test_lookahead.py``, ``tests/test_worst_traces_browser.py``). Written once here: a test may import the
package's code, the package never imports a test.

``repeated`` makes a run of any number of rounds that still reads as one (indices, contexts, output, summary);
``add_leaves`` grows a round's token tree by leaves beside it; the ``*_texts`` are the soak's named worst cases."""

from __future__ import annotations

import dataclasses
import json
from typing import Callable

from ..limits import MAX_TRACE_ROUNDS
from ..run import summarize


def repeated(trace, rounds: int, each: Callable | None = None):
    """``trace``'s rounds repeated to ``rounds`` rounds, consistent (indices, contexts, output, summary); ``each``
    may change every round first (the round, not yet renumbered → a round)."""
    out, context = [], len(trace.prompt_ids)
    for i in range(rounds):
        r = trace.rounds[i % len(trace.rounds)]
        out.append(dataclasses.replace(each(r) if each else r, index=i, context_len=context))
        context += len(r.emitted)
    out = tuple(out)
    return dataclasses.replace(trace, rounds=out, output_ids=tuple(t for r in out for t in r.emitted),
                               summary=summarize(out, trace.summary.record_s, trace.summary.stop_reason,
                                                 trace.settings.lossy))


def add_leaves(tree: dict, extra: int) -> None:
    """A round's tree (as trace JSON) grown by ``extra`` leaves beside it under the context, each an input of the
    verifying forward that sees only itself (and the prompt)."""
    had, width = len(tree["nodes"]), len(tree["positions"])
    tree["nodes"] += [{"token": 5, "parent": -1, "depth": 1, "rank": had + i, "accepted": False, "q": 0.001}
                      for i in range(extra)]
    tree["positions"] += [{"kind": "node", "node": had + i, "slot": 0, "offset": 1} for i in range(extra)]
    tree["attention"] = ([row + "0" * extra for row in tree["attention"]]
                         + ["0" * (width + i) + "1" + "0" * (extra - i - 1) for i in range(extra)])
    tree["sees_prompt"] += [True] * extra


def worst_trace_texts() -> list[tuple[str, str]]:
    """(name, JSON) of legal worst cases built from real tiny runs: a Thompson-sampling trace of
    ``MAX_TRACE_ROUNDS`` rounds with γ + 1 = 65 θ each, and a BiTA round with a 1 000-input tree."""
    import explorer

    ts = explorer.decode("tiny-random:1", "abcabc", draft="model:tiny-random:2:1", controller="beta-ts", gamma=64,
                         max_new_tokens=96)
    steps = {"theta": [0.5] * 65, "continue": [True] * 64 + [False]}
    many = repeated(ts, MAX_TRACE_ROUNDS, each=lambda r: dataclasses.replace(
        r, controller={**r.controller, **steps}) if "theta" in r.controller else r)
    many = dataclasses.replace(many, text="", settings=dataclasses.replace(ts.settings,
                                                                          max_new_tokens=len(many.output_ids)))
    bita = explorer.decode("tiny-random:1", "abcabc", method="bita", max_new_tokens=8)
    data = json.loads(bita.to_json())
    r = next(r for r in data["rounds"] if r.get("tree"))
    n = 1000
    r["tree"].update(nodes=[{"token": 5, "parent": -1, "depth": 1, "rank": i, "accepted": False, "q": 0.001}
                            for i in range(n)],
                     positions=[{"kind": "node", "node": i} for i in range(n)], attention=["1" * n] * n,
                     sees_prompt=[True] * n, accepted_path=[], next_group=-1)
    r.update(n_accepted=0, drafted=[], q_drafted=[], p_drafted=[], uniforms=[], draft_top=[])
    return [(f"beta-ts, γ = 64, {MAX_TRACE_ROUNDS} rounds of 65 θ", many.to_json()),
            (f"bita, a {n}-input tree", json.dumps(data)),
            (f"lookahead, W = 16, N = 5, G = 8: {LOOKAHEAD_MOST_NODES} guess nodes + a 4 × 16 window",
             lookahead_text(LOOKAHEAD_MOST_NODES))]


LOOKAHEAD_MOST_NODES = 32  # G·(N − 1) at the options' largest: what a round can verify
OVERSIZED_NODES = 1024  # what the trace checks allowed a lookahead round before issue 40 (BiTA's bound)


def lookahead_text(nodes: int) -> str:
    """A lookahead trace from a real tiny run at the largest options (W = 16, N = 5, G = 8) whose first tree round
    holds ``nodes`` guess nodes (the run's own, then more beside them) and a full 4 × 16 window, with 8 guesses
    of 4 tokens. At 32 nodes it is the largest legal round; at 1 024 (3.5 MB) it made the mask view a 1.19 M-cell
    figure before issue 40, and the trace checks now refuse it."""
    import explorer

    run = explorer.decode("tiny-random:1", "hello there hello there hello", method="lookahead", lookahead_window=16,
                          lookahead_ngram=5, lookahead_guesses=8, max_new_tokens=24)
    data = json.loads(run.to_json())
    r = next(r for r in data["rounds"] if r.get("tree") and r["tree"]["nodes"])
    d, tree = r["detail"], r["tree"]
    guesses = (d["guesses"] + [[5, 6, 7, 8]] * 8)[:8]
    d.update(levels=[[5 + i] * 16 for i in range(4)], outputs=[9] * 16, guesses=[(g + [5] * 4)[:4] for g in guesses],
             sources=(d["sources"] + ["window"] * 8)[:8], followed=(d["followed"] + [0] * 8)[:8])
    add_leaves(tree, nodes - len(tree["nodes"]))
    return json.dumps(data)


def oversized_trace_texts() -> list[tuple[str, str]]:
    """(name, JSON) of traces past what their method can write, each to be refused in one line on load."""
    return [(f"lookahead, {OVERSIZED_NODES} guess nodes in a round", lookahead_text(OVERSIZED_NODES))]
