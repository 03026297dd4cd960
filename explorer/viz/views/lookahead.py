"""Lookahead decoding's views (Fu et al., arXiv 2402.02057, section 3 and Figure 2): the selected round's 2-D
Jacobi window — one row per Jacobi step, oldest first, and the outputs that become its next row — with the
columns that completed an n-gram; the guesses the pool offered after the last decided token and how far the
target followed each; and, over the run, the rows each forward carried against the tokens it gave."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from ...trace.window import window_visibility
from ..style import GREY, OKABE_ITO, base_layout, empty_figure
from ..text import label, plot_label
from ..tree_list import CSS, tree_rounds_figure
from ...words import plural
from . import MAX_MASK_DRAWN, MethodView, register, register_note

LOOKAHEAD_CSS = """
.la-grid { border-collapse: collapse; margin: 6px 0; font-family: ui-monospace, monospace; font-size: 12px; }
.la-grid td, .la-grid th { border: 1px solid #e5e7eb; padding: 1px 5px; white-space: pre; }
.la-grid th { font-family: inherit; font-weight: normal; color: #4b5563; text-align: left; }
.la-out td.la-tok { background: #fef3c7; }
.la-gram td.la-tok { box-shadow: inset 0 -2px 0 #0072b2; }
.la-guess { font-family: ui-monospace, monospace; margin: 2px 0; }
"""


SOURCES = {"prompt": "from the prompt; ", "window": "from the Jacobi window; "}


def _is_lookahead(trace) -> bool:
    return trace.method == "lookahead" and any(r.tree is not None for r in trace.rounds)


def _selected(trace, round_index: int):
    return trace.rounds[max(0, min(int(round_index), len(trace.rounds) - 1))]


def _cell(trace, token: int) -> str:
    return f"<td class='la-tok'>{html.escape(label(trace, token))}</td>"


def window_html(trace, round_index: int) -> str:
    """The selected round in words, its window as a grid, and the guesses it verified."""
    r = _selected(trace, round_index)
    d = r.detail or {}
    levels, outputs = d.get("levels") or [], d.get("outputs") or []
    guesses, followed, sources = d.get("guesses") or [], d.get("followed") or [], d.get("sources") or []
    n = trace.settings.options.get("ngram", len(levels) + 1)
    accepted = len((r.tree or {}).get("accepted_path", []))
    if guesses:
        verified = (f"the pool held {plural(len(guesses), 'n-gram')} starting with the last decided token; verified as one "
                    f"tree in the same forward, the target followed the best of them for <b>{accepted}</b> {'token' if accepted == 1 else 'tokens'}")
    else:
        verified = "the pool held no n-gram starting with the last decided token: only the window rode along"
    filling = "" if d.get("collected") else (f" The window is still filling (it keeps {n - 1} Jacobi steps): no "
                                              "n-gram collected yet.")
    head = (f"<b>Round {r.index + 1}</b>: {verified}. The forward carried {d.get('input_positions', 0)} rows; the "
            f"window's columns gave {plural(d.get('collected', 0), 'n-gram')}, {d.get('new_grams', 0)} new; the pool now "
            f"holds {d.get('pool', 0):,}.{filling}")
    complete = bool(d.get("collected"))
    rows = []
    for i, level in enumerate(levels):
        cls = " class='la-gram'" if complete else ""
        rows.append(f"<tr{cls}><th>step −{len(levels) - i}</th>{''.join(_cell(trace, t) for t in level)}</tr>")
    if outputs:
        cls = "la-out la-gram" if complete else "la-out"
        rows.append(f"<tr class='{cls}'><th>outputs → next row</th>{''.join(_cell(trace, t) for t in outputs)}</tr>")
    columns = "".join(f"<th>{j + 1}</th>" for j in range(len(levels[0]) if levels else 0))
    grid = (f"<table class='la-grid'><tr><th>Jacobi step \\ column</th>{columns}</tr>{''.join(rows)}</table>"
            if levels else "")
    legend = ("<div class='tl-stat'>Each row is one Jacobi step of guesses (oldest first), each one position further "
              "ahead than the row above; a guess is the model's token for the position after the guesses it sees. "
              "Read a column top to bottom: once the window is full, each column plus its output (yellow) is an "
              "n-gram the pool keeps under its first token.</div>")
    items = []
    for g, guess in enumerate(guesses):
        got = followed[g] if g < len(followed) else 0
        words = "".join(f"<span class='tl-node{' tl-acc' if k < got else ''}'>{html.escape(label(trace, t))}</span>"
                        for k, t in enumerate(guess))
        source = SOURCES.get(sources[g] if g < len(sources) else "", "")
        items.append(f"<div class='la-guess'>{words}<span class='tl-stat'>{source}target followed {got} of "
                     f"{len(guess)}</span></div>")
    guess_block = ("<div class='tl-head'>Guesses verified (newest first; green: accepted):</div>" + "".join(items)
                   if items else "")
    return (f"<style>{CSS}{LOOKAHEAD_CSS}</style><div class='tl-view'><div class='tl-head'>{head}</div>{legend}"
            f"<div class='tl-scroll'>{grid}</div>{guess_block}</div>")


MASK_KINDS = ("hidden", "the decided context", "verification branch (the guesses' tree)",
              "lookahead branch (the Jacobi window)")


def mask_figure(trace, round_index: int) -> go.Figure:
    """The selected round's one forward as the paper's Figure 2(b): which input row (a query) sees which (a key).
    Rows: the last decided token, the guesses' tree, the window level by level; every row also sees the whole
    cached context (not drawn)."""
    r = _selected(trace, round_index)
    d, tree = r.detail or {}, r.tree or {}
    nodes, attention, levels = tree.get("nodes", []), tree.get("attention", []), d.get("levels") or []
    width = len(levels[0]) if levels else 0
    if not nodes and not levels:
        return empty_figure("Lookahead decoding: the attention mask", "this round carried no guesses")
    ids = list(trace.prompt_ids) + list(trace.output_ids)
    last = ids[r.context_len - 1] if 0 < r.context_len <= len(ids) else None
    names = ["last decided " + (plot_label(trace, last) if last is not None else "token")]
    names += [f"guess d{node['depth']} {plot_label(trace, node['token'])}" for node in nodes]
    names += [f"step −{len(levels) - l} +{j + 1} {plot_label(trace, t)}" for l, level in enumerate(levels)
              for j, t in enumerate(level)]
    n, size = len(nodes), len(names)
    shown = min(size, MAX_MASK_DRAWN)  # the trace checks allow at most 1 + 32 + 4·16 rows; a trace made in-process
    names = names[:shown]               # is drawn to the same cap as BiTA's mask
    z = [[0] * shown for _ in range(shown)]  # (rows, rows): 0 hidden, else the kind of key seen
    for row in range(shown):
        z[row][0] = 1
    for i, seen in enumerate(attention[:min(n, shown - 1)]):
        for j, bit in enumerate(seen[:min(n, shown - 1)]):
            if bit == "1":
                z[1 + i][1 + j] = 2
    if 1 + n < shown:
        for a, seen in enumerate(window_visibility(len(levels), width)[:shown - 1 - n]):
            for b, bit in enumerate(seen[:shown - 1 - n]):
                if bit:
                    z[1 + n + a][1 + n + b] = 3
    hover = [[f"{names[i]} {'sees' if z[i][j] else 'does not see'} {names[j]}" for j in range(shown)]
             for i in range(shown)]
    colours = ["#ffffff", GREY, OKABE_ITO["green"], OKABE_ITO["orange"]]
    scale = [[k / 4 + e / 4, colours[k]] for k in range(4) for e in (0, 1)]
    fig = go.Figure(go.Heatmap(z=z, x=list(range(shown)), y=list(range(shown)), zmin=0, zmax=4, colorscale=scale,
                               customdata=hover, showscale=False, xgap=1, ygap=1,
                               hovertemplate="%{customdata}<extra></extra>"))
    for k in (1, 2, 3):  # the legend: one entry per kind of key
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=MASK_KINDS[k],
                                 marker={"color": colours[k], "size": 10, "symbol": "square"}))
    ticks = {"tickmode": "array", "tickvals": list(range(shown)), "ticktext": names, "tickfont": {"size": 9}}
    fig.update_layout(xaxis={"title": {"text": "key: the input row attended to (same order; hover a cell)"},
                             "showticklabels": False},
                      yaxis={"title": {"text": "query: input row"}, "autorange": "reversed", **ticks,
                             "showticklabels": shown <= 40, "automargin": True})
    part = f"; the first {shown} drawn: a larger figure would stall the page" if shown < size else ""
    return base_layout(fig, f"Lookahead decoding: round {r.index + 1}'s attention mask ({size} rows in one forward{part})",
                       height=min(720, 260 + 14 * shown))


def rounds_figure(trace, round_index: int):
    """Per round: the verification tree's nodes, the accepted ones, and the rows the forward carried beside the
    context (the guesses' tree and the window: the price of the round's guessing)."""
    def beside(r) -> int:
        return (r.detail or {}).get("input_positions", 0) - (r.tree or {}).get("context_inputs", 0)

    return tree_rounds_figure(trace, round_index, beside, "guess and window rows in the forward",
                              "the forward carried %{y} rows beside the context",
                              "Lookahead decoding: guesses, accepted and rows per round")


register(MethodView(name="lookahead-window", title="Lookahead decoding: the Jacobi window and the guesses",
                    applies=_is_lookahead, render=window_html, kind="html",
                    description="The round's 2-D window of Jacobi guesses, the n-grams its columns gave, and the "
                                "pool's guesses with how far the target followed each."))
register(MethodView(name="lookahead-mask", title="Lookahead decoding: the attention mask of one forward",
                    applies=_is_lookahead, render=mask_figure,
                    description="Which input row sees which in the round's forward: the last decided token, the "
                                "guesses' tree and the Jacobi window (the paper's Figure 2(b))."))
register(MethodView(name="lookahead-rounds", title="Lookahead decoding: guesses, accepted and rows per round",
                    applies=_is_lookahead, render=rounds_figure,
                    description="Verification-tree nodes, accepted tokens and the rows each forward carried."))
register_note("lookahead", "Lookahead decoding is lossless: the window and the pool only propose; every token is the "
                           "target's own (greedy: identical to autoregressive decoding; sampling: drawn from the "
                           "target's distribution at every node).")
