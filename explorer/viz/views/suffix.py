"""SuffixDecoding's views (Oliaro et al., arXiv 2411.04975, sections 3–4): what the context was matched to and
where, the speculation tree grown from the match with each node's count and frequency-based probability and
its fate; and, over the run, match length against drafted and accepted nodes."""

from __future__ import annotations

import html
import re

from ..text import label
from ..tree_list import nested_tree_html, tree_rounds_figure
from ...words import plural, times
from . import MethodView, register, register_note

SOURCES = {"answers": "the target's answers shipped with the model", "history": "an earlier run of this session",
           "request": "this prompt and answer so far"}


BANK = re.compile(r"the (greedy|sampled) answer to bank prompt ([a-z]+)-(\d+)")


def where_found(found_in: str) -> str:
    """Where a match was found, in words: the index names a shipped answer by its prompt's id in the trainers' prompt
    bank ("the greedy answer to bank prompt list-07", #48), which says nothing to a reader."""
    m = BANK.fullmatch(found_in)
    if m is None:
        return found_in
    mode, kind, number = m.groups()
    how = "own greedy answer" if mode == "greedy" else "sampled answer"
    return f"the target's {how} to one of the shipped training prompts: {kind} prompt no. {int(number) + 1}"


def _is_suffix(trace) -> bool:
    return trace.method == "suffix" and any(r.tree is not None for r in trace.rounds)


def _selected(trace, round_index: int):
    return trace.rounds[max(0, min(int(round_index), len(trace.rounds) - 1))]


def tree_html(trace, round_index: int) -> str:
    """The selected round: the matched suffix and where it was found, then the speculation tree."""
    r = _selected(trace, round_index)
    tree, d = r.tree or {}, r.detail or {}
    nodes, path = tree.get("nodes", []), tree.get("accepted_path", [])
    matched = "".join(html.escape(label(trace, t).strip("'")) for t in d.get("matched", []))
    source = SOURCES.get(d.get("source"), "nothing")
    if d.get("match_length"):
        found = f" ({html.escape(where_found(str(d['found_in'])))})" if d.get("found_in") else ""
        head = (f"<b>Round {r.index + 1}</b>: the last <b>{d['match_length']}</b> {'token' if d['match_length'] == 1 else 'tokens'} of the context, "
                f"<span class='tl-match'>{matched}</span>, occur {times(d.get('occurrences', 0))} in "
                f"{html.escape(source)}{found}. What followed them there grew a tree of {plural(len(nodes), 'node')} "
                f"(expected accepted tokens {d.get('score', 0):.2f}); the target accepted <b>{len(path)}</b>.")
    else:
        head = (f"<b>Round {r.index + 1}</b>: no suffix of the context occurs in any corpus: nothing drafted, the "
                "target decoded one token.")
    counts = d.get("counts") or []

    def stat(i: int, node: dict) -> str:
        count = f"{plural(counts[i], 'occurrence')}, " if i < len(counts) else ""
        return f"{count}probability {node['q']:.2f}" + (f", target p {node['p']:.2f}" if node.get("p") is not None else "")

    legend = ("<div class='tl-stat'>Green: accepted; dashed: the target's own token after the accepted path; a "
              "node's probability is the share of the match's occurrences that continued this way.</div>")
    return f"<div class='tl-view'><div class='tl-head'>{head}</div>{legend}{nested_tree_html(trace, r, stat)}</div>"


def rounds_figure(trace, round_index: int):
    """Per round: the matched suffix's length, the tree's nodes and the accepted ones."""
    return tree_rounds_figure(trace, round_index, lambda r: (r.detail or {}).get("match_length", 0),
                              "matched suffix (tokens)", "matched the last %{y} tokens",
                              "SuffixDecoding: match length, tree and accepted per round")


register(MethodView(name="suffix-tree", title="SuffixDecoding: the match and its speculation tree", applies=_is_suffix,
                    render=tree_html, kind="html",
                    description="The suffix of the context found in earlier outputs or the prompt, where, and the "
                                "tree of what followed it there, with counts, probabilities and fates."))
register(MethodView(name="suffix-rounds", title="SuffixDecoding: match length and acceptance per round",
                    applies=_is_suffix, render=rounds_figure,
                    description="Matched suffix length, tree nodes and accepted nodes, round by round."))
register_note("suffix", "SuffixDecoding is lossless: the tree only proposes; every token is the target's own "
                        "(greedy: identical to autoregressive decoding; sampling: drawn from the target's "
                        "distribution at every node).")
