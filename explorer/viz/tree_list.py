"""A round's token tree as nested lists (the tree views of SuffixDecoding and EAGLE-2): each node's token as
text (escaped), a caller's line of numbers beside it, the accepted path filled, and the target's own token
after that path dashed; and the run's trees per round (nodes, accepted, one line of the method's). Reads
only the trace's public ``tree`` (``RoundTrace.tree``) and the caller's reading of ``detail``."""

from __future__ import annotations

import html
from typing import Callable

import plotly.graph_objects as go

from .style import FATE_COLOURS, GREY, OKABE_ITO, base_layout
from .text import label

CSS = """
.tl-view { font-size: 13px; line-height: 1.45; }
.tl-head { margin-bottom: 6px; }
.tl-match { font-family: ui-monospace, monospace; background: #f3f4f6; border-radius: 4px; padding: 1px 4px; }
.tl-tree ul { list-style: none; margin: 0; padding-left: 18px; border-left: 1px dotted #d1d5db; }
.tl-tree > ul { padding-left: 0; border-left: none; }
.tl-tree li { margin: 2px 0; white-space: nowrap; }
.tl-node { font-family: ui-monospace, monospace; border-radius: 4px; padding: 0 4px; border: 1px solid #d1d5db; }
.tl-acc { background: %(acc)s; color: white; border-color: %(acc)s; }
.tl-tgt { border: 1px dashed %(tgt)s; color: %(tgt)s; }
.tl-stat { color: #4b5563; font-size: 12px; margin-left: 6px; }
.tl-scroll { max-height: 360px; overflow: auto; }
""" % {"acc": FATE_COLOURS["accepted"], "tgt": FATE_COLOURS["target"]}


def nested_tree_html(trace, r, stat: Callable[[int, dict], str]) -> str:
    """Round ``r``'s tree; ``stat(i, node)`` the plain-text numbers shown beside node i (escaped here)."""
    nodes = (r.tree or {}).get("nodes", [])
    path = (r.tree or {}).get("accepted_path", [])
    children: dict[int, list[int]] = {}
    for i, n in enumerate(nodes):
        children.setdefault(n["parent"], []).append(i)
    own = r.emitted[len(path)] if len(r.emitted) > len(path) else None
    on_path = set(path)

    def branch(parent: int) -> str:
        items = []
        for i in children.get(parent, []):
            cls = "tl-node tl-acc" if i in on_path else "tl-node"
            items.append(f"<li><span class='{cls}'>{html.escape(label(trace, nodes[i]['token']))}</span>"
                         f"<span class='tl-stat'>{html.escape(stat(i, nodes[i]))}</span>{branch(i)}</li>")
        if parent == (path[-1] if path else -1) and own is not None:
            kind = r.emitted_kind[len(path)] if len(r.emitted_kind) > len(path) else "target"
            items.append(f"<li><span class='tl-node tl-tgt'>{html.escape(label(trace, own))}</span>"
                         f"<span class='tl-stat'>the target's own token ({html.escape(kind)})</span></li>")
        return f"<ul>{''.join(items)}</ul>" if items else ""

    return f"<style>{CSS}</style><div class='tl-tree tl-scroll'>{branch(-1)}</div>"


def tree_rounds_figure(trace, round_index: int, line: Callable, line_name: str, line_hover: str,
                       title: str) -> go.Figure:
    """Per round: the tree's nodes, the accepted ones, and ``line(round)`` (the method's own measure), the
    selected round marked; the title ends with the run's tokens per target forward."""
    rounds = [r for r in trace.rounds if r.tree is not None]
    xs = [r.index + 1 for r in rounds]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=xs, y=[len(r.tree["nodes"]) for r in rounds], name="tree nodes", marker_color=GREY,
                         opacity=0.45, hovertemplate="round %{x}<br>%{y} tree nodes<extra></extra>"))
    fig.add_trace(go.Bar(x=xs, y=[len(r.tree["accepted_path"]) for r in rounds], name="accepted",
                         marker_color=FATE_COLOURS["accepted"],
                         hovertemplate="round %{x}<br>%{y} accepted<extra></extra>"))
    fig.add_trace(go.Scatter(x=xs, y=[line(r) for r in rounds], name=line_name, mode="lines+markers",
                             line={"color": OKABE_ITO["orange"], "width": 2},
                             hovertemplate=f"round %{{x}}<br>{line_hover}<extra></extra>"))
    selected = trace.rounds[max(0, min(int(round_index), len(trace.rounds) - 1))].index + 1
    fig.add_vline(x=selected, line={"color": "#111827", "dash": "dot", "width": 1})
    fig.update_layout(barmode="overlay", xaxis={"title": {"text": "round"}},
                      yaxis={"title": {"text": "tokens"}, "rangemode": "tozero"})
    s = trace.summary
    per = f" · {s.tokens_per_target_forward:.2f} tokens per forward" if s.tokens_per_target_forward else ""
    return base_layout(fig, f"{title}{per}", height=300)

