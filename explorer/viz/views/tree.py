"""BiTA's views (Lin et al. 2024, Figures 3, 5 and 6): the round's draft token tree with the accepted path,
linked to the attention mask of the forward that verified it; and tree size against accepted depth per round.

The tree (SVG, left): the context's last token at the root, one column per depth, each candidate labelled
with its token and its rank in its mask's top-k; the accepted path in green, the target's own token after
it (the correction or bonus) dashed. The mask (right): rows are the forward's inputs, columns what they may
attend, grouped as in Figures 3 and 6 — prompt tokens [P], context, candidates, mask tokens [M] — green
where a row attends a column. Hovering a node highlights its row and column in the mask (and a row its node):
plain CSS (``:has``), so it works in a static page and in the app alike.

Large trees (the fully expanded ablation) show a partial mask, as Figure 6 does: the nodes on the accepted
path, their siblings and the top-1 chain, with the mask groups of the context and the accepted nodes.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from ..style import FATE_COLOURS, GREY, OKABE_ITO, base_layout, tint
from ..text import label
from ...words import plural
from . import MAX_MASK_DRAWN, MethodView, register, register_note

PROMPT_COLOUR = OKABE_ITO["purple"]  # [P], purple as in the paper's Figure 2
MASK_COLOUR = OKABE_ITO["orange"]  # [M]
CONTEXT_COLOUR = OKABE_ITO["blue"]
CANDIDATE_COLOUR = GREY
ACCEPTED_COLOUR = FATE_COLOURS["accepted"]
SCROLL_HINT_ROWS = 16  # a mask with more rows than this does not fit its box: say that it scrolls
MAX_MASK_POSITIONS = 72  # beyond this the mask shows the part around the accepted path (Figure 6)
CONTEXT_SHOWN = 3  # context columns shown by token; the earlier ones fold into one "…" column
COL_W, ROW_H, NODE_W, NODE_H = 118, 30, 96, 22


def _is_bita(trace) -> bool:
    return trace.method == "bita" and any(r.tree is not None for r in trace.rounds)


def _selected(trace, round_index: int):
    return trace.rounds[max(0, min(int(round_index), len(trace.rounds) - 1))]


def _short(trace, token: int, width: int = 12) -> str:
    text = label(trace, token)
    return text if len(text) <= width else text[: width - 1] + "…'"


def _context(trace, r) -> list[int]:
    """The committed context before round ``r``: prompt + everything emitted before it."""
    out = list(trace.prompt_ids)
    for prev in trace.rounds[: r.index]:
        out += list(prev.emitted)
    return out


def tree_html(trace, round_index: int) -> str:
    """The selected round's tree and its attention mask, side by side, hover-linked."""
    r = _selected(trace, round_index)
    tree = r.tree
    if tree is None:
        return "<p>This round has no tree.</p>"
    context = _context(trace, r)
    nodes = tree["nodes"]
    path = tree["accepted_path"]
    target_kind = r.emitted_kind[len(path)] if len(r.emitted) > len(path) else None
    head = (f"<div class='bita-head'><b>Round {r.index + 1}</b> · {html.escape(str(tree.get('kind', '?')))} tree · "
            f"M = {html.escape(str(tree.get('masks', '?')))} mask tokens · top-{html.escape(str(tree.get('top_k', '?')))} · {plural(len(nodes), 'candidate node')} "
            f"· {len(tree['positions'])} tree + mask inputs in one forward · accepted "
            f"<b>{len(path)}</b> {'draft' if len(path) == 1 else 'drafts'}")
    if len(r.emitted) > len(path):
        head += f" + the target's own token {html.escape(label(trace, r.emitted[len(path)]))} ({target_kind})"
    owner = tree.get("next_group")
    if owner is not None and r.index < len(trace.rounds) - 1:
        who = "the context" if owner < 0 else f"node {html.escape(label(trace, nodes[owner]['token']))}"
        head += f" · next drafts from the mask group of {who}"
    head += "</div>"
    shown = _shown_positions(tree)
    svg = _tree_svg(trace, r, context)
    table = _mask_table(trace, r, context, shown)
    css = BITA_CSS + _link_css(tree, shown)
    note = ""
    if len(shown) < len(tree["positions"]):
        note = (f"<div class='bita-note'>Partial mask (as the paper's Figure 6): {len(shown)} of "
                f"{len(tree['positions'])} inputs — the accepted path, its siblings and the top-1 chain, with the "
                "mask groups of the context and of the accepted nodes"
                + (f" (the first {MAX_MASK_DRAWN} of them: a larger table would stall the page)"
                   if len(shown) == MAX_MASK_DRAWN else "") + ".</div>")
    legend = ("<div class='bita-legend'><span class='bl bl-acc'>accepted path</span> "
              "<span class='bl bl-cand'>candidate</span> <span class='bl bl-tgt'>the target's own token</span> "
              "<span class='bl bl-p' title='BiTA&#x27;s trained prompt tokens: learned keys and values placed before "
              "the context, not words of your prompt'>[P] BiTA's learned prompt token (not your prompt)</span> "
              "<span class='bl bl-m' title='BiTA&#x27;s trained mask tokens: placeholders whose outputs are the "
              "next round&#x27;s drafts'>[M] mask token (drafts the next tokens)</span> "
              "<span class='bl bl-on'>attends</span> · hover a node to find its row in the mask</div>")
    body = table.split("</thead>")[-1]
    rows, columns = body.count("<tr"), table.count("class='col")
    scroll = (f"<div class='bita-scroll-hint'>{rows} rows × {columns} columns: scroll inside the box ↕ ↔ to see all "
              "of it</div>") if rows > SCROLL_HINT_ROWS else ""
    return (f"<style>{css}</style><div class='bita-view'>{head}{legend}<div class='bita-panes'>"
            f"<div class='bita-tree'>{svg}</div><div class='bita-mask'>{scroll}<div class='bita-mask-box'>{table}</div>"
            f"{note}</div></div></div>")


def _shown_positions(tree: dict) -> list[int]:
    """Indices of the positions the mask shows: all, or Figure 6's part for large trees."""
    positions = tree["positions"]
    if len(positions) <= MAX_MASK_POSITIONS:
        return list(range(len(positions)))
    nodes = tree["nodes"]
    path = tree["accepted_path"]
    keep = set(path)
    parents = {-1} | set(path)
    keep |= {i for i, n in enumerate(nodes) if n["parent"] in parents}  # the path's children: what was tried
    node = path[-1] if path else -1
    while True:  # the top-1 chain below the last accepted node
        child = next((i for i, n in enumerate(nodes) if n["parent"] == node and n["rank"] == 0), None)
        if child is None:
            break
        keep.add(child)
        node = child
    groups = {-1} | set(path)
    shown = [i for i, p in enumerate(positions)
             if (p["kind"] == "node" and p["node"] in keep) or (p["kind"] == "mask" and p["node"] in groups)]
    return shown[:MAX_MASK_DRAWN]


def _tree_svg(trace, r, context: list[int]) -> str:
    """Root at the left, one column per depth; rows in depth-first order."""
    tree = r.tree
    nodes = tree["nodes"]
    path = set(tree["accepted_path"])
    children: dict[int, list[int]] = {-1: []}
    for i, n in enumerate(nodes):
        children.setdefault(n["parent"], []).append(i)
    row: dict[int, int] = {}
    last = tree["accepted_path"][-1] if tree["accepted_path"] else -1
    extra = len(r.emitted) > len(tree["accepted_path"])
    TARGET = -2  # the target's own token: drawn as the first child of the last accepted node

    def place(node: int) -> None:
        row[node] = len(row)
        if node == last and extra:
            row[TARGET] = len(row)
        for c in sorted(children.get(node, []), key=lambda c: nodes[c]["rank"]):
            place(c)

    place(-1)
    depth = max((n["depth"] for n in nodes), default=0) + (1 if extra else 0)
    rows = len(row)
    width, height = (depth + 1) * COL_W + 10, max(rows, 1) * ROW_H + 16
    parts = []

    def xy(node: int) -> tuple[int, int]:
        d = 0 if node < 0 else nodes[node]["depth"]
        return 6 + d * COL_W, 8 + row[node] * ROW_H

    for i, n in enumerate(nodes):  # edges first, under the boxes
        (px, py), (cx, cy) = xy(n["parent"]), xy(i)
        on = i in path
        parts.append(f"<path class='be{' be-acc' if on else ''}' d='M{px + NODE_W},{py + NODE_H / 2} "
                     f"C{px + NODE_W + 14},{py + NODE_H / 2} {cx - 14},{cy + NODE_H / 2} {cx},{cy + NODE_H / 2}'/>")
    pending = context[-1] if context else None
    root_label = f"ctx {_short(trace, pending, 10)}" if pending is not None else "context"
    root_title = f"the committed context ({len(context)} tokens), ending in {label(trace, pending)}" if pending is not None else "context"
    parts.append(_box(6, 8 + row[-1] * ROW_H, root_label, "bn-root", root_title, _position_of(tree, "ctx")))
    for i, n in enumerate(nodes):
        x, y = xy(i)
        cls = "bn-acc" if i in path else "bn-cand"
        p = n.get("p")
        title = (f"candidate {label(trace, n['token'])} · depth {n['depth']} · rank {n['rank'] + 1} in mask "
                 f"{n['depth']}'s top-k · q (mask) = {n.get('q', 0):.3f}"
                 + (f" · p (target) = {p:.3f}" if isinstance(p, (int, float)) else "")
                 + (" · accepted" if i in path else ""))
        parts.append(_box(x, y, f"{_short(trace, n['token'])} #{n['rank'] + 1}", cls, title, _position_of(tree, i)))
    if extra:
        token = r.emitted[len(tree["accepted_path"])]
        px, py = xy(last)
        d = (0 if last < 0 else nodes[last]["depth"]) + 1
        x, y = 6 + d * COL_W, 8 + row[TARGET] * ROW_H
        parts.append(f"<path class='be be-tgt' d='M{px + NODE_W},{py + NODE_H / 2} C{px + NODE_W + 14},"
                     f"{py + NODE_H / 2} {x - 14},{y + NODE_H / 2} {x},{y + NODE_H / 2}'/>")
        kind = r.emitted_kind[len(tree["accepted_path"])]
        parts.append(_box(x, y, _short(trace, token), "bn-tgt", f"the target's own token {label(trace, token)} "
                                                                 f"({kind}): committed, run in the next round", None))
    return (f"<svg class='bita-svg' width='{width}' height='{height}' viewBox='0 0 {width} {height}' "
            f"xmlns='http://www.w3.org/2000/svg'>{''.join(parts)}</svg>")


def _position_of(tree: dict, node) -> int | None:
    if node == "ctx":
        return None
    for i, p in enumerate(tree["positions"]):
        if p["kind"] == "node" and p["node"] == node:
            return i
    return None


def _box(x, y, text, cls, title, position) -> str:
    data = f" tn-{position}" if position is not None else ""
    return (f"<g class='bn {cls}{data}' data-tip='{html.escape(title, quote=True)}'>"
            f"<rect x='{x}' y='{y}' width='{NODE_W}' height='{NODE_H}' rx='5'/>"
            f"<text x='{x + NODE_W / 2}' y='{y + 15}' text-anchor='middle'{_fitted(text)}>{html.escape(text)}</text></g>")


def _fitted(text: str) -> str:
    """A label wider than its box (11 px monospace: ≈ 6.6 px a character) squeezed into it, not spilling out."""
    room = NODE_W - 8
    return f" textLength='{room}' lengthAdjust='spacingAndGlyphs'" if len(text) * 6.6 > room else ""


def _mask_table(trace, r, context: list[int], shown: list[int]) -> str:
    """The attention mask of the round's forward as a table, rows and columns grouped as Figures 3 and 6."""
    tree = r.tree
    nodes, positions = tree["nodes"], tree["positions"]
    n_prompt = int(tree.get("prompt_tokens", 0))
    attention, sees = tree["attention"], tree["sees_prompt"]
    ctx_tail = context[-CONTEXT_SHOWN:]
    folded = len(context) - len(ctx_tail)

    def pos_label(i: int) -> str:
        p = positions[i]
        if p["kind"] == "node":
            return _short(trace, nodes[p["node"]]["token"], 10)
        owner = "ctx" if p["node"] < 0 else _short(trace, nodes[p["node"]]["token"], 8)
        return f"[M{p.get('slot', '')}]·{owner}"

    def pos_title(i: int) -> str:
        p = positions[i]
        if p["kind"] == "node":
            n = nodes[p["node"]]
            return f"candidate {label(trace, n['token'])} (depth {n['depth']}, rank {n['rank'] + 1})"
        owner = "the context" if p["node"] < 0 else f"candidate {label(trace, nodes[p['node']]['token'])}"
        return f"mask token {p.get('slot', '')} of the group attached to {owner}"

    # column groups: prompt, context, candidates, masks
    cols = [("p", j, f"[P{j + 1}]", f"BiTA's learned prompt token {j + 1}: trained keys and values per layer, not a "
                                    "word of your prompt") for j in range(n_prompt)]
    if folded:
        cols.append(("c", -1, "…", f"{folded} earlier context tokens"))
    cols += [("c", j, _short(trace, t, 10), f"context {label(trace, t)}") for j, t in enumerate(ctx_tail)]
    cols += [("t", i, pos_label(i), pos_title(i)) for i in shown]
    groups = [("learned prompt tokens", sum(c[0] == "p" for c in cols), "g-p"),
              ("context", sum(c[0] == "c" for c in cols), "g-c"),
              ("candidates", sum(c[0] == "t" and positions[c[1]]["kind"] == "node" for c in cols), "g-n"),
              ("mask tokens", sum(c[0] == "t" and positions[c[1]]["kind"] == "mask" for c in cols), "g-m")]
    out = ["<table class='bita-table'><thead><tr><th></th>"]
    out += [f"<th colspan='{n}' class='grp {cls}'>{name}</th>" for name, n, cls in groups if n]
    out.append("</tr><tr><th class='corner'>row attends →</th>")
    for kind, j, text, title in cols:
        cls = {"p": "h-p", "c": "h-c"}.get(kind) or ("h-n" if positions[j]["kind"] == "node" else "h-m")
        link = f" hc-{j}" if kind == "t" else ""
        out.append(f"<th class='col {cls}{link}' data-tip='{html.escape(title)}'><div>{html.escape(text)}</div></th>")
    out.append("</tr></thead><tbody>")
    # the context row: the last context token (the pending one, run in this forward): causal, no prompt
    if ctx_tail:
        cells = ["<td class='off'></td>"] * n_prompt + ["<td class='on'></td>"] * (int(bool(folded)) + len(ctx_tail))
        cells += ["<td class='off'></td>"] * len(shown)
        out.append(f"<tr class='r-ctx'><th class='rowh h-c' data-tip='the last context token (its keys and values are "
                   f"computed in this forward; earlier context rows are causal and never see the prompt tokens)'>"
                   f"{html.escape(_short(trace, ctx_tail[-1], 10))}</th>{''.join(cells)}</tr>")
    for i in shown:
        p = positions[i]
        cls = "h-n" if p["kind"] == "node" else "h-m"
        on_path = p["kind"] == "node" and nodes[p["node"]]["accepted"]
        cells = [f"<td class='{'on' if sees[i] else 'off'}'></td>"] * n_prompt
        cells += ["<td class='on'></td>"] * (int(bool(folded)) + len(ctx_tail))
        cells += [f"<td class='{'on' if attention[i][j] == '1' else 'off'}{' dg' if i == j else ''}'></td>" for j in shown]
        out.append(f"<tr class='hr-{i}{' r-acc' if on_path else ''}'><th class='rowh {cls}' data-tip='{html.escape(pos_title(i))}'>"
                   f"{html.escape(pos_label(i))}</th>{''.join(cells)}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _link_css(tree: dict, shown: list[int]) -> str:
    """Hover links: a node box lights up its row and column, a row lights up its node box."""
    rules = []
    for i in shown:
        if tree["positions"][i]["kind"] != "node":
            continue
        rules.append(f".bita-view:has(.tn-{i}:hover) .hr-{i} > * {{box-shadow: inset 0 2px 0 #111827, inset 0 -2px 0 #111827;}}"
                     f".bita-view:has(.tn-{i}:hover) .hc-{i} {{background:#111827;color:#fff;}}"
                     f".bita-view:has(.hr-{i}:hover) .tn-{i} rect {{stroke:#111827;stroke-width:3;}}")
    return "".join(rules)


BITA_CSS = f"""
.bita-view {{ font-family: ui-sans-serif, system-ui, sans-serif; font-size: 12px; }}
.bita-head {{ margin-bottom: 4px; font-size: 13px; }}
.bita-legend {{ margin-bottom: 6px; color: #374151; }}
.bita-legend .bl {{ display: inline-block; padding: 0 6px; border-radius: 3px; margin-right: 4px; }}
.bl-acc {{ background: {tint(ACCEPTED_COLOUR, 0.16)}; border: 1px solid {ACCEPTED_COLOUR}; }}
.bl-cand {{ background: #f3f4f6; border: 1px solid {CANDIDATE_COLOUR}; }}
.bl-tgt {{ background: #fff; border: 1px dashed {FATE_COLOURS['target']}; }}
.bl-p {{ background: {tint(PROMPT_COLOUR, 0.16)}; border: 1px solid {PROMPT_COLOUR}; }}
.bl-m {{ background: {tint(MASK_COLOUR, 0.16)}; border: 1px solid {MASK_COLOUR}; }}
.bl-on {{ background: #86efac; }}
.bita-panes {{ display: flex; gap: 14px; align-items: flex-start; flex-wrap: wrap; }}
.bita-tree {{ max-height: 560px; overflow: auto; border: 1px solid #e5e7eb; border-radius: 6px; padding: 4px; }}
.bita-tree {{ flex: 0 1 auto; }}
.bita-mask {{ flex: 1 1 320px; min-width: 0; }}
/* a box that looks scrollable: framed, its scrollbars always drawn, an inner shadow at the edges */
.bita-mask-box, .bita-tree {{ scrollbar-width: auto; scrollbar-color: #94a3b8 #f1f5f9; scrollbar-gutter: stable; }}
.bita-mask-box {{ max-height: 520px; overflow: scroll; border: 1px solid #cbd5e1; border-radius: 6px;
  box-shadow: inset -10px -10px 10px -10px rgba(15, 23, 42, 0.25); }}
.bita-mask-box::-webkit-scrollbar, .bita-tree::-webkit-scrollbar {{ width: 10px; height: 10px; }}
.bita-mask-box::-webkit-scrollbar-thumb, .bita-tree::-webkit-scrollbar-thumb {{ background: #94a3b8; border-radius: 5px; }}
.bita-mask-box::-webkit-scrollbar-track, .bita-tree::-webkit-scrollbar-track {{ background: #f1f5f9; }}
.bita-scroll-hint {{ font-size: 12px; color: #475569; margin-bottom: 3px; }}
.bita-svg text {{ font-size: 11px; font-family: ui-monospace, monospace; fill: #111827; pointer-events: none; }}
.bita-svg .bn rect {{ fill: #f3f4f6; stroke: {CANDIDATE_COLOUR}; stroke-width: 1; }}
.bita-svg .bn-acc rect {{ fill: {tint(ACCEPTED_COLOUR, 0.16)}; stroke: {ACCEPTED_COLOUR}; stroke-width: 2; }}
.bita-svg .bn-root rect {{ fill: #dbeafe; stroke: {CONTEXT_COLOUR}; }}
.bita-svg .bn-tgt rect {{ fill: #ffffff; stroke: {FATE_COLOURS['target']}; stroke-dasharray: 4 2; stroke-width: 2; }}
.bita-svg .bn:hover rect {{ stroke: #111827; stroke-width: 3; }}
.bita-svg .be {{ fill: none; stroke: #cbd5e1; stroke-width: 1.2; }}
.bita-svg .be-acc {{ stroke: {ACCEPTED_COLOUR}; stroke-width: 3; }}
.bita-svg .be-tgt {{ stroke: {FATE_COLOURS['target']}; stroke-dasharray: 4 2; stroke-width: 2; }}
.bita-view table.bita-table {{ border-collapse: collapse !important; font-family: ui-monospace, monospace;
  font-size: 10px !important; width: auto !important; margin: 0 !important; line-height: 1.1 !important; }}
.bita-view table.bita-table td, .bita-view table.bita-table th {{ padding: 0 2px !important; border: 1px solid #fff !important;
  line-height: 1.1 !important; font-size: 10px !important; background-clip: padding-box; }}
.bita-view table.bita-table td {{ width: 12px !important; min-width: 12px !important; max-width: 12px !important;
  height: 13px !important; padding: 0 !important; }}
.bita-view table.bita-table th.grp {{ border-bottom: 2px solid !important; }}
.bita-table td.on {{ background: #4ade80; }}
.bita-table td.off {{ background: #e5e7eb; }}
.bita-table td.dg {{ outline: 1px solid #166534; outline-offset: -2px; }}
.bita-table th.col {{ height: 74px; vertical-align: bottom; padding: 0; white-space: nowrap; font-weight: normal; }}
.bita-table th.col div {{ writing-mode: vertical-rl; transform: rotate(180deg); max-height: 72px; overflow: hidden; }}
.bita-table th.rowh {{ text-align: right; padding-right: 4px; white-space: nowrap; font-weight: normal; }}
.bita-table th.grp {{ font-size: 10px; font-weight: 600; border-bottom: 2px solid; }}
.bita-table .g-p, .bita-table .h-p {{ color: {PROMPT_COLOUR}; border-color: {PROMPT_COLOUR}; }}
.bita-table .g-c, .bita-table .h-c {{ color: {CONTEXT_COLOUR}; border-color: {CONTEXT_COLOUR}; }}
.bita-table .g-n, .bita-table .h-n {{ color: #374151; border-color: {CANDIDATE_COLOUR}; }}
.bita-table .g-m, .bita-table .h-m {{ color: #b45309; border-color: {MASK_COLOUR}; }}
.bita-table tr.r-acc th.rowh {{ color: {ACCEPTED_COLOUR}; font-weight: 700; }}
.bita-table tbody tr:hover > * {{ box-shadow: inset 0 2px 0 #6b7280, inset 0 -2px 0 #6b7280; }}
.bita-table th.corner {{ font-size: 9px; color: #6b7280; font-weight: normal; vertical-align: bottom; }}
.bita-note {{ color: #6b7280; margin-top: 4px; }}
"""


def rounds_figure(trace, round_index: int) -> go.Figure:
    """Per round: candidate nodes in the tree, inputs of the forward, and the drafts accepted."""
    rounds = [r for r in trace.rounds if r.tree is not None]
    xs = [r.index + 1 for r in rounds]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=xs, y=[len(r.tree["nodes"]) for r in rounds], name="candidate nodes",
                         marker_color=CANDIDATE_COLOUR, opacity=0.45,
                         hovertemplate="round %{x}<br>%{y} candidate nodes<extra></extra>"))
    fig.add_trace(go.Bar(x=xs, y=[len(r.tree["accepted_path"]) for r in rounds], name="accepted drafts",
                         marker_color=ACCEPTED_COLOUR,
                         hovertemplate="round %{x}<br>accepted %{y} drafts<extra></extra>"))
    fig.add_trace(go.Scatter(x=xs, y=[r.detail.get("input_positions", len(r.tree["positions"])) for r in rounds],
                             name="inputs in the forward (right axis)", yaxis="y2", mode="lines",
                             line={"color": MASK_COLOUR, "width": 2},
                             hovertemplate="round %{x}<br>%{y} inputs in one forward<extra></extra>"))
    selected = _selected(trace, round_index).index + 1
    fig.add_vline(x=selected, line={"color": "#111827", "dash": "dot", "width": 1})
    fig.update_layout(barmode="overlay", xaxis={"title": {"text": "round"}},
                      yaxis={"title": {"text": "tokens"}, "rangemode": "tozero"},
                      yaxis2={"title": {"text": "inputs"}, "overlaying": "y", "side": "right", "rangemode": "tozero"})
    s = trace.summary
    per = f" · {s.tokens_per_target_forward:.2f} tokens per forward" if s.tokens_per_target_forward else ""
    return base_layout(fig, f"BiTA: tree size and accepted drafts per round{per}", height=300)


register(MethodView(name="bita-tree", title="BiTA: draft tree and attention mask", applies=_is_bita,
                    render=tree_html, kind="html",
                    description="The round's token tree with the accepted path, linked to the attention mask of "
                                "its forward (prompt, context, candidates, mask tokens)."))
register(MethodView(name="bita-rounds", title="BiTA: tree size and acceptance per round", applies=_is_bita,
                    render=rounds_figure,
                    description="Candidate nodes, inputs per forward and accepted drafts, round by round."))
register_note("bita", "BiTA is lossless: prompt tokens are seen only by mask tokens, so the target's tokens are "
                      "its own. Greedy output equals autoregressive decoding; sampling draws every token from the "
                      "target's distribution (the same distribution, not the same draws as ar with this seed).")
