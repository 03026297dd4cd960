"""EAGLE-2's views (Li et al., arXiv 2406.16858, section 4): the selected round's dynamic draft tree with the
head's confidence in each node, its value (the product of confidences down its path: the head's estimate that
the target accepts it) and the target's probability, and, over the run, the tokens each round expected from its
values against those it got."""

from __future__ import annotations

from ..tree_list import nested_tree_html, tree_rounds_figure
from ...words import plural
from . import MethodView, register, register_note


def _is_eagle_tree(trace) -> bool:
    return trace.method == "eagle-tree" and any(r.tree is not None for r in trace.rounds)


def _selected(trace, round_index: int):
    return trace.rounds[max(0, min(int(round_index), len(trace.rounds) - 1))]


def tree_html(trace, round_index: int) -> str:
    """The selected round in words, then its tree with confidences and values."""
    r = _selected(trace, round_index)
    d, tree = r.detail or {}, r.tree or {}
    nodes, path = tree.get("nodes", []), tree.get("accepted_path", [])
    values = d.get("value") or []
    if nodes:
        head = (f"<b>Round {r.index + 1}</b>: the feature head ran {plural(d.get('head_forwards', 0), 'step')} and proposed "
                f"{plural(d.get('candidates', 0), 'candidate token')} over {plural(d.get('depth', 0), 'depth')}; the {len(nodes)} with "
                f"the highest value formed the tree (expected tokens from their values: {d.get('expected', 1):.2f}); "
                f"the target accepted <b>{len(path)}</b> and added its own.")
    else:
        head = (f"<b>Round {r.index + 1}</b>: nothing drafted (the first round has no target features yet, or no "
                "node was worth verifying at this machine's prices): the target decoded one token.")

    def stat(i: int, node: dict) -> str:
        value = f", value {values[i]:.2f}" if i < len(values) else ""
        target = f", target p {node['p']:.2f}" if node.get("p") is not None else ""
        return f"confidence {node['q']:.2f}{value}{target}"

    legend = ("<div class='tl-stat'>Green: accepted; dashed: the target's own token after the accepted path. "
              "Confidence: the head's probability for the token; value: the product of confidences from the "
              "context down to the node.</div>")
    return f"<div class='tl-view'><div class='tl-head'>{head}</div>{legend}{nested_tree_html(trace, r, stat)}</div>"


def rounds_figure(trace, round_index: int):
    """Per round: tree nodes, accepted nodes, and the accepted tokens the values promised (Σ values)."""
    return tree_rounds_figure(trace, round_index, lambda r: (r.detail or {}).get("expected", 1.0) - 1,
                              "expected accepted (Σ values)", "the values promised %{y:.2f} accepted",
                              "EAGLE-2: tree, accepted and expected per round")


register(MethodView(name="eagle-tree", title="EAGLE-2: the dynamic draft tree", applies=_is_eagle_tree,
                    render=tree_html, kind="html",
                    description="The round's draft tree: each node's head confidence, value and fate."))
register(MethodView(name="eagle-tree-rounds", title="EAGLE-2: tree, accepted and expected per round",
                    applies=_is_eagle_tree, render=rounds_figure,
                    description="Tree nodes, accepted nodes and the accepted tokens the values promised, per round."))
register_note("eagle-tree", "EAGLE-2 is lossless: the tree only proposes; every token is the target's own (greedy: "
                            "identical to autoregressive decoding; sampling: drawn from the target's distribution at "
                            "every node).")
