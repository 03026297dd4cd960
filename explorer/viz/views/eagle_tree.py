"""EAGLE-2's views (Li et al., arXiv 2406.16858, section 4): the selected round's dynamic draft tree with the
head's confidence in each node, its value (the product of confidences down its path: the head's estimate that
the target accepts it) and the target's probability, and, over the run, the tokens each round expected from its
values against those it got."""

from __future__ import annotations

import plotly.graph_objects as go

from ..style import FATE_COLOURS, GREY, OKABE_ITO, base_layout
from ..tree_list import nested_tree_html
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
        head = (f"<b>Round {r.index + 1}</b>: the feature head ran {d.get('head_forwards', 0)} step(s) and proposed "
                f"{d.get('candidates', 0)} candidate token(s) over {d.get('depth', 0)} depth(s); the {len(nodes)} with "
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


def rounds_figure(trace, round_index: int) -> go.Figure:
    """Per round: tree nodes, accepted nodes, and the tokens the values promised against those emitted."""
    rounds = [r for r in trace.rounds if r.tree is not None]
    xs = [r.index + 1 for r in rounds]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=xs, y=[len(r.tree["nodes"]) for r in rounds], name="tree nodes", marker_color=GREY,
                         opacity=0.45, hovertemplate="round %{x}<br>%{y} tree nodes<extra></extra>"))
    fig.add_trace(go.Bar(x=xs, y=[len(r.tree["accepted_path"]) for r in rounds], name="accepted",
                         marker_color=FATE_COLOURS["accepted"],
                         hovertemplate="round %{x}<br>%{y} accepted<extra></extra>"))
    fig.add_trace(go.Scatter(x=xs, y=[(r.detail or {}).get("expected", 1.0) - 1 for r in rounds],
                             name="expected accepted (Σ values)", mode="lines+markers",
                             line={"color": OKABE_ITO["orange"], "width": 2},
                             hovertemplate="round %{x}<br>the values promised %{y:.2f} accepted<extra></extra>"))
    fig.add_vline(x=_selected(trace, round_index).index + 1, line={"color": "#111827", "dash": "dot", "width": 1})
    fig.update_layout(barmode="overlay", xaxis={"title": {"text": "round"}},
                      yaxis={"title": {"text": "tokens"}, "rangemode": "tozero"})
    s = trace.summary
    per = f" · {s.tokens_per_target_forward:.2f} tokens per forward" if s.tokens_per_target_forward else ""
    return base_layout(fig, f"EAGLE-2: tree, accepted and expected per round{per}", height=300)


register(MethodView(name="eagle-tree", title="EAGLE-2: the dynamic draft tree", applies=_is_eagle_tree,
                    render=tree_html, kind="html",
                    description="The round's draft tree: each node's head confidence, value and fate."))
register(MethodView(name="eagle-tree-rounds", title="EAGLE-2: tree, accepted and expected per round",
                    applies=_is_eagle_tree, render=rounds_figure,
                    description="Tree nodes, accepted nodes and the accepted tokens the values promised, per round."))
register_note("eagle-tree", "EAGLE-2 is lossless: the tree only proposes; every token is the target's own (greedy: "
                            "identical to autoregressive decoding; sampling: drawn from the target's distribution at "
                            "every node).")
