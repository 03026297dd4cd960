"""A draft chain's theory (``hierarchical``): the run's expected speed-up as a two-level chain, placed on the curves.

Leviathan et al.'s Theorem 3.8 prices a draft by its acceptance α, its length γ and its cost c per step. A chain
(section 7; Spector & Ré's staged speculative decoding) drafts the draft too: the draft decodes its own tokens
speculatively with a smaller proposer, so its cost per drafted token falls from c to c / S_inner, S_inner being
Theorem 3.8 at the proposer's own α, γ and c (``theory.chain_speedup``). Every number comes from the run's rounds
(after the first, whose verification also ran the prompt):

    α (top)     accepted / tested drafts the target saw
    α (inner)   accepted / tested proposals the draft saw (the level just below the top; deeper levels lumped in)
    c           seconds per forward of the top draft / seconds per target pass
    c (inner)   seconds of the levels below per proposed token / seconds per forward of the top draft

so the figure shows how the run's chain is expected to do against γ inner and against the proposer's acceptance,
and where the chain stops paying against the top draft drafting alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ... import theory
from ..style import BASELINE_COLOUR, RUN_COLOUR, TARGET_COLOUR, base_layout
from ..text import plotly_text, safe_markdown
from . import MethodView, register, register_words
from .hierarchical import level_totals

INNER_GAMMAS = np.arange(1, 17)
INNER_ALPHAS = np.round(np.arange(0.0, 0.991, 0.01), 2)


@dataclass(frozen=True)
class ChainCosts:
    """A chain run's measured numbers, each as Theorem 3.8 reads it (see the module docstring)."""

    top: str            # the draft the target verifies
    below: str          # the level under it (a deeper chain: the smallest first, '>' between)
    alpha: float
    gamma: float        # mean tokens the chain handed the target a round
    c: float
    inner_alpha: float
    inner_gamma: int    # the run's setting
    inner_c: float
    proposals_per_inner_round: float
    seconds: dict       # per part, whole run after the first round: the levels below, the top draft, the target

    @property
    def expected(self) -> float:
        return float(theory.chain_speedup(self.alpha, self.gamma, self.c, self.inner_alpha, self.inner_gamma,
                                          self.inner_c))

    @property
    def top_alone(self) -> float:
        return float(theory.speedup(self.alpha, self.gamma, self.c))


def chain_costs(trace) -> ChainCosts | None:
    """The numbers above from a chain run's rounds, or None where they cannot be had (no chain, a trace from before
    the levels' clocks were recorded, no draft the target tested, no forward of the top draft). A proposer that
    proposed nothing has α inner 0: the chain is then the top draft alone."""
    if trace is None or trace.method != "hierarchical":
        return None
    totals = level_totals(trace)
    later = [r for r in trace.rounds[1:] if r.drafted and r.target_forwards and r.detail.get("level_seconds")
             and len(r.detail["level_seconds"]) == len(totals)]
    if len(totals) < 2 or not later or not totals[-1]["tested"]:
        return None
    below_s = sum(sum(r.detail["level_seconds"][:-1]) for r in later)
    top_s = sum(r.detail["level_seconds"][-1] for r in later)
    target_s = sum(r.timing.verify_s for r in later)
    top_forwards = sum(r.detail["level_forwards"][-1] for r in later)
    inner_rounds = [inner for r in later for inner in r.detail.get("inner_rounds") or ()]
    proposed = sum(len(inner["drafted"]) for inner in inner_rounds)
    target_passes = sum(r.target_forwards for r in later)
    if not top_forwards or target_s <= 0 or top_s <= 0:
        return None
    per_top = top_s / top_forwards
    top, below = totals[-1], totals[-2]
    return ChainCosts(
        top=top["level"], below=">".join(t["level"] for t in totals[:-1]),
        alpha=min(top["accepted"] / top["tested"], 1.0),
        gamma=sum(len(r.drafted) for r in later) / len(later),
        c=per_top / (target_s / target_passes),
        inner_alpha=min(below["accepted"] / below["tested"], 1.0) if below["tested"] else 0.0,  # proposed nothing
        inner_gamma=int(later[0].detail.get("inner_gamma") or 1),
        inner_c=(below_s / proposed) / per_top if proposed else 0.0,
        proposals_per_inner_round=proposed / len(inner_rounds) if inner_rounds else 0.0,
        seconds={"below": below_s, "top": top_s, "target": target_s},
    )


def chain_theory_figure(trace, round_index: int) -> go.Figure:
    """Two panels: the chain's expected speed-up against γ inner, and against the proposer's acceptance, each with
    the top draft drafting alone (no level below) and the run's own point."""
    costs = chain_costs(trace)
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.3, subplot_titles=(
        "Expected speed-up vs γ inner", "Expected speed-up vs α inner"))
    if costs is None:
        return base_layout(fig, "Draft chain theory: this run has no levels' clocks to price", height=560)
    k = costs
    alone = k.top_alone
    top, below = plotly_text(k.top), plotly_text(k.below)  # a loaded trace names its levels: untrusted
    by_gamma = theory.chain_speedup(k.alpha, k.gamma, k.c, k.inner_alpha, INNER_GAMMAS, k.inner_c)
    by_alpha = theory.chain_speedup(k.alpha, k.gamma, k.c, INNER_ALPHAS, k.inner_gamma, k.inner_c)
    for row, x, y, axis in ((1, INNER_GAMMAS, by_gamma, "γ inner = %{x}"),
                            (2, INNER_ALPHAS, by_alpha, "α inner = %{x:.2f}")):
        fig.add_trace(go.Scatter(
            x=x, y=y, mode="lines", name=f"the chain, {below} under {top}", legendgroup="chain",
            showlegend=row == 1, line={"color": TARGET_COLOUR, "width": 2.5},
            hovertemplate=f"{axis}<br>expected speed-up ×%{{y:.2f}}<extra>the chain</extra>"), row=row, col=1)
        fig.add_trace(go.Scatter(
            x=[x[0], x[-1]], y=[alone, alone], mode="lines", name=f"{top} drafting alone", legendgroup="alone",
            showlegend=row == 1, line={"color": BASELINE_COLOUR, "dash": "dash", "width": 1.5},
            hovertemplate=f"{top} drafting alone: ×%{{y:.2f}}<extra></extra>"), row=row, col=1)
    for row, x in ((1, k.inner_gamma), (2, k.inner_alpha)):
        fig.add_trace(go.Scatter(
            x=[x], y=[k.expected], mode="markers", name="this run (its α's, c's and γ's)", legendgroup="run",
            showlegend=row == 1, marker={"size": 12, "symbol": "diamond", "color": RUN_COLOUR,
                                         "line": {"color": "white", "width": 1}},
            hovertemplate=(f"this run: γ inner {k.inner_gamma}, α inner {k.inner_alpha:.2f}, c inner "
                           f"{k.inner_c:.3f}<br>α {k.alpha:.2f}, γ {k.gamma:.1f}, c {k.c:.2f}<br>"
                           f"expected ×%{{y:.2f}} (drafting alone ×{alone:.2f})<extra></extra>")), row=row, col=1)
    fig.update_xaxes(title_text="γ inner (proposals per inner round)", dtick=1, row=1, col=1)
    fig.update_xaxes(title_text="α inner (share the draft accepts)", range=[0, 1], row=2, col=1)
    for row in (1, 2):
        fig.update_yaxes(title_text="× plain decoding", rangemode="tozero", row=row, col=1)
    title = f"Draft chain, Thm 3.8 at each level: ×{k.expected:.2f} ({top} alone ×{alone:.2f})"
    return base_layout(fig, title, height=680)


def chain_words(trace) -> str:
    """Which level paid for what, in plain words from the run's clocks (empty where the run has none)."""
    k = chain_costs(trace)
    if k is None:
        return ""
    top, below = safe_markdown(k.top), safe_markdown(k.below)
    total = sum(k.seconds.values())
    share = {part: _percent(s / total) for part, s in k.seconds.items()}
    priced = ("the theorem prices a forward over several proposals like a one-token step; on a CPU it costs more"
              if not str(trace.device).startswith("cuda") else
              "the theorem prices a forward over several proposals like a one-token step, nearly so on a GPU")
    verdict = ("so the level below paid for itself" if k.expected > k.top_alone + 0.005 else
               "so the level below did not pay for itself")
    return (f"In this chain, of the time in the models: {below} proposing took {share['below']}, "
            f"{top} checking its proposals and drafting took {share['top']}, the target verifying took "
            f"{share['target']}. {top} accepted {100 * k.inner_alpha:.0f} % of the proposals it tested "
            f"({k.proposals_per_inner_round:.1f} proposed an inner round, γ inner {k.inner_gamma}); the target "
            f"accepted {100 * k.alpha:.0f} % of {top}'s. Leviathan et al.'s Theorem 3.8 at each level expects "
            f"×{k.expected:.2f} against ×{k.top_alone:.2f} for {top} drafting alone at the same c, "
            f"{verdict} in theory ({priced}).")


def _percent(share: float) -> str:
    return "under 1 %" if 0 < share < 0.005 else f"{100 * share:.0f} %"


register(MethodView(
    name="hierarchical-theory",
    title="Draft chain theory: what each level is expected to add",
    applies=lambda trace: chain_costs(trace) is not None,
    render=chain_theory_figure,
    description="Theorem 3.8 at each level of the chain, from this run's acceptance and costs: the expected "
                "speed-up against γ inner and the proposer's acceptance, beside the top draft drafting alone.",
))
register_words("hierarchical", chain_words)
