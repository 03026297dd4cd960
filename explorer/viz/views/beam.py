"""Speculative beam search (method ``beam``): the beam tree of the whole run, step by step — the beams that
ran on, the candidates pruned (grey), the ones that finished, the best beam's path — with the selected
round's steps shaded and coloured by what the target did with the draft's step (accepted, corrected,
bonus). Scores on hover."""

from __future__ import annotations


import plotly.graph_objects as go

from ..style import FATE_COLOURS, base_layout, empty_figure
from ..text import label, piece, plotly_text
from . import MethodView, register, register_note

TITLE = "Beam search: every step's beams"
MAX_LABEL = 12  # characters of a best-beam step's text written beside it
MAX_STEPS = 48  # beam steps drawn: a long run shows the selected round and the steps before it
LOOK_AHEAD = 6  # steps drawn after the selected round


def _beam(trace) -> bool:
    return trace.method == "beam"


def beam_nodes(trace, round_index: int | None = None) -> tuple[list[dict], list[tuple[int, int]]]:
    """The candidates of ``MAX_STEPS`` steps that hold the selected round (all steps of a run of at most
    ``MAX_STEPS``; from the first step while the selected round is among the first ones — the page opens on
    an early round, and a window ending ``LOOK_AHEAD`` steps after it showed 8 steps of 64 — else the
    window ending ``LOOK_AHEAD`` steps after it) as points: x its length in tokens, y its rank in its step;
    and the edges (parent point, child point) between shown points."""
    steps = [(r.index, step) for r in trace.rounds for step in range(len((r.detail.get("beam") or {}).get("layers", ())))]
    chosen = round_index if round_index is not None else (trace.rounds[-1].index if trace.rounds else 0)
    ends = [i + 1 for i, (r, _) in enumerate(steps) if r <= chosen]
    high = min(len(steps), max((ends[-1] if ends else 0) + LOOK_AHEAD, MAX_STEPS))
    low = max(0, high - MAX_STEPS)
    points, edges = [], []
    previous: list = [(None, 0)]  # the previous step's kept candidates: (point index or None, length)
    step = 0
    for r in trace.rounds:
        beam = r.detail.get("beam") or {}
        for layer, kind, on_best in zip(beam.get("layers", ()), beam.get("kinds", ()), beam.get("best", ())):
            shown = low <= step < high
            kept = []
            for rank, node in enumerate(layer):
                parent, length = previous[node["parent"]] if node["parent"] < len(previous) else (None, 0)
                x = length + len(node["tokens"])
                index = None
                if shown:
                    index = len(points)
                    points.append({"round": r.index, "x": x, "y": rank, "kind": kind, "tokens": node["tokens"],
                                   "score": node["score"], "kept": node["kept"], "finished": node["finished"],
                                   "best": rank == on_best, "parent": parent})
                    if parent is not None:
                        edges.append((parent, index))
                if node["kept"]:
                    kept.append((index, x))
            previous = kept or previous
            step += 1
            if step >= high:
                return points, edges
    return points, edges


def beam_tree_figure(trace, round_index: int) -> go.Figure:
    points, edges = beam_nodes(trace, round_index)
    if not points:
        return empty_figure(TITLE, "No beam steps recorded in this trace.")
    fig = go.Figure()
    groups = [("kept: ran on", lambda p: p["kept"] and not p["best"], FATE_COLOURS["target"], "circle"),
              ("finished (end of text or length)", lambda p: p["finished"] and not p["best"], FATE_COLOURS["bonus"],
               "diamond"),
              ("pruned", lambda p: not p["kept"] and not p["finished"] and not p["best"], FATE_COLOURS["discarded"], "circle"),
              ("the best beam", lambda p: p["best"], FATE_COLOURS["accepted"], "star")]
    xs, ys = [], []  # every edge in one trace, drawn under the points
    for a, b in edges:
        xs += [points[a]["x"], points[b]["x"], None]
        ys += [points[a]["y"], points[b]["y"], None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": "#d1d5db", "width": 1}, hoverinfo="skip",
                             showlegend=False))
    best = [i for i, p in enumerate(points) if p["best"]]
    start = [0] if points and points[0]["x"] == len(points[0]["tokens"]) else []  # from the prompt, when shown
    fig.add_trace(go.Scatter(x=start + [points[i]["x"] for i in best], y=start + [points[i]["y"] for i in best],
                             mode="lines", line={"color": FATE_COLOURS["accepted"], "width": 3}, hoverinfo="skip",
                             showlegend=False))
    for name, wanted, colour, symbol in groups:
        chosen = [p for p in points if wanted(p)]
        if not chosen:
            continue
        # words beside the best beam's steps only (above and below it in turn, so neighbours do not run together);
        # every other candidate's words are on hover; the page hides a label that would still overlap another
        # (``ui/fit_figures.js``): "5 millionsquaremeters" at 1 400 px, a block at 390 px (#48)
        labelled = name == "the best beam"
        fig.add_trace(go.Scatter(
            x=[p["x"] for p in chosen], y=[p["y"] for p in chosen], mode="markers+text" if labelled else "markers",
            name=name, marker={"color": colour, "size": 11 if symbol == "star" else 8, "symbol": symbol,
                               "opacity": 0.45 if name == "pruned" else 1.0},
            text=[_short(trace, p["tokens"]) for p in chosen] if labelled else None,
            textposition=["top center" if i % 2 == 0 else "bottom center" for i in range(len(chosen))],
            textfont={"size": 11, "color": "#065f46"},
            customdata=[[_hover(trace, p)] for p in chosen], hovertemplate="%{customdata[0]}<extra></extra>"))
    selected = [p for p in points if p["round"] == round_index]
    round_words = ""
    if selected:
        start = min(p["x"] - len(p["tokens"]) for p in selected)
        kinds = (trace.rounds[round_index].detail.get("beam") or {}).get("kinds", [])
        fig.add_vrect(x0=start + 0.5, x1=max(p["x"] for p in selected) + 0.5, fillcolor="#fde68a", opacity=0.3,
                      line_width=0)
        after = (trace.rounds[round_index].detail.get("beam") or {}).get("after")
        more = f"; then {after['rounds']} more search rounds ruled out the other beams" if after else ""
        round_words = f"<br><sup>shaded: round {round_index + 1}, {_kinds_words(kinds)}{more}</sup>"
    fig.update_layout(xaxis={"title": {"text": "tokens generated (beam length)"}, "rangemode": "tozero"},
                      # room above rank 0 and below the last rank for the best beam's words (written above and below)
                      yaxis={"title": {"text": "rank in its step (0 = best)"}, "dtick": 1,
                             "range": [max(p["y"] for p in points) + 0.7, -0.8]},
                      hovermode="closest")
    rule = (trace.settings.options or {}).get("rule", "exact")
    width = (trace.settings.options or {}).get("width", "?")
    words = "exact: identical to beam search on the target" if rule == "exact" else \
        "004's Algorithm 2: approximate, not beam search on the target"
    base_layout(fig, f"{TITLE} (k = {plotly_text(width)}; {words}){round_words}", height=460)
    return fig.update_layout(margin={"t": 120})  # room for the title's second line above the legend


def _kinds_words(kinds: list[str]) -> str:
    accepted = sum(k == "accepted" for k in kinds)
    if kinds and kinds[0] == "branch":
        return "every beam verified its draft, then branched"
    last = {"corrected": "then the target's own step (the draft's beams differed)",
            "bonus": "then a bonus step", "target": "the target's step (no draft)"}.get(kinds[-1] if kinds else "", "")
    return f"{accepted} draft step{'s' if accepted != 1 else ''} accepted" + (f", {last}" if last else "")


def _short(trace, tokens: list[int]) -> str:
    text = "".join(piece(trace, t) for t in tokens).replace("\n", "↵")
    return plotly_text(text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…")


def _hover(trace, p: dict) -> str:
    what = "the best beam" if p["best"] else "finished" if p["finished"] else "ran on" if p["kept"] else "pruned"
    tokens = " ".join(label(trace, t) for t in p["tokens"])
    return (f"{plotly_text(tokens)}<br>round {p['round'] + 1}, rank {p['y']} · {what}<br>"
            f"log-probability {p['score']:.3f} (per token {p['score'] / max(p['x'], 1):.3f})")


register(MethodView(
    name="beam-tree",
    title="Beam search: the beam tree, step by step",
    applies=_beam,
    render=beam_tree_figure,
    description="Every candidate of every step by its length and rank: the beams that ran on, the pruned ones in "
                "grey, the finished ones, the best beam's path; the selected round shaded.",
))
register_note("beam", "Speculative beam search. The exact rule (Leviathan et al. A.4) keeps a draft's beam step only "
                      "when the target's own beam step gives the same beams, so its output is beam search on the "
                      "target (identical to Hugging Face's num_beams=k). The 004 rule (Algorithm 2 of Tulsian, Goyal "
                      "and Aggarwal's reproduction of speculative decoding, paper 004 of the papers this explorer "
                      "implements) verifies each beam's draft by speculative sampling and branches after it: "
                      "approximate, and its beams differ from beam search's. The token view shows the best beam.")
