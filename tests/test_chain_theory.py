"""A draft chain's theory (#49, the cascade drawn): Theorem 3.8 at each level (``theory.chain_speedup``), each
level's clocks in the trace (``level_seconds``, checked on load), and the view and words that price the run's
levels from them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import PREFIX

import explorer
from explorer import theory
from explorer.viz.explain import drivers
from explorer.viz.views.chain import chain_costs, chain_theory_figure, chain_words
from explorer.viz.views.hierarchical import level_totals

CHAIN = "model:tiny-random:2:1>model:tiny-random:3"


def test_a_chain_is_theorem_3_8_with_the_drafts_cost_divided_by_its_own_speed_up():
    alpha, gamma, c = 0.8, 6, 0.3
    # a proposer the draft never accepts, at no cost, changes nothing: each inner round is one draft step
    assert theory.chain_speedup(alpha, gamma, c, 0.0, 4, 0.0) == pytest.approx(theory.speedup(alpha, gamma, c))
    # one the draft always accepts, at no cost: an inner round of γ_in proposals costs one draft step for γ_in + 1
    assert theory.chain_speedup(alpha, gamma, c, 1.0, 4, 0.0) == pytest.approx(theory.speedup(alpha, gamma, c / 5))
    # by hand: E[tokens] / (γ c / S_inner + 1), S_inner = E_inner / (γ_in c_in + 1)
    e = (1 - alpha ** (gamma + 1)) / (1 - alpha)
    e_inner = (1 - 0.6 ** 4) / (1 - 0.6)
    s_inner = e_inner / (3 * 0.05 + 1)
    assert theory.chain_speedup(alpha, gamma, c, 0.6, 3, 0.05) == pytest.approx(e / (gamma * c / s_inner + 1))
    # a proposer slower than it helps makes the chain slower than the draft alone
    assert theory.chain_speedup(alpha, gamma, c, 0.1, 4, 0.9) < theory.speedup(alpha, gamma, c)
    curve = theory.chain_speedup(alpha, gamma, c, np.array([0.2, 0.5, 0.9]), 4, 0.01)
    assert list(curve) == sorted(curve)  # a better proposer never hurts at a fixed cost


@pytest.fixture(scope="module")
def chain_run(tiny_target):
    return explorer.decode(tiny_target, prompt_ids=PREFIX, method="hierarchical", draft=CHAIN, gamma=4,
                           inner_gamma=2, max_new_tokens=24)


def test_each_levels_clocks_sit_inside_the_rounds_drafting(chain_run):
    drafting = [r for r in chain_run.rounds if r.drafted]
    assert drafting
    for r in drafting:
        seconds = r.detail["level_seconds"]
        assert len(seconds) == len(r.detail["levels"]) == 2 and all(s >= 0 for s in seconds)
        assert sum(seconds) <= r.timing.draft_s + 1e-3  # the chain's clocks are a part of the round's drafting
        assert seconds[-1] > 0  # the upper draft ran a forward in every drafting round
    assert explorer.load_trace(chain_run.to_json()) == chain_run


def test_the_view_prices_each_level_from_the_runs_own_numbers(chain_run):
    costs = chain_costs(chain_run)
    assert costs is not None and (costs.top, costs.below) == tuple(reversed(CHAIN.split(">")))
    later = [r for r in chain_run.rounds[1:] if r.drafted and r.target_forwards]
    small, upper = level_totals(chain_run)
    assert costs.alpha == pytest.approx(min(upper["accepted"] / upper["tested"], 1.0))
    assert costs.inner_alpha == pytest.approx(min(small["accepted"] / small["tested"], 1.0))
    per_top = sum(r.detail["level_seconds"][1] for r in later) / sum(r.detail["level_forwards"][1] for r in later)
    per_pass = sum(r.timing.verify_s for r in later) / sum(r.target_forwards for r in later)
    assert costs.c == pytest.approx(per_top / per_pass) and costs.inner_gamma == 2
    assert costs.expected == pytest.approx(float(theory.chain_speedup(
        costs.alpha, costs.gamma, costs.c, costs.inner_alpha, 2, costs.inner_c)))
    assert "hierarchical-theory" in {v.name for v in explorer.viz.views_for(chain_run)}
    fig = chain_theory_figure(chain_run, 0)
    runs = [t for t in fig.data if t.name.startswith("this run")]
    assert len(runs) == 2 and all(t.y[0] == pytest.approx(costs.expected) for t in runs)
    assert runs[0].x[0] == 2 and runs[1].x[0] == pytest.approx(costs.inner_alpha)
    titles = [fig.layout[axis].title.text for axis in ("xaxis", "xaxis2", "yaxis", "yaxis2")]
    assert all(titles) and "γ inner" in titles[0] and "α inner" in titles[1]
    words = chain_words(chain_run)
    assert f"expects ×{costs.expected:.2f} against ×{costs.top_alone:.2f}" in words
    assert words in drivers(chain_run)  # "why this speed" says which level paid for what


def test_forged_or_missing_clocks_are_refused_or_leave_the_view_out(chain_run):
    data = json.loads(chain_run.to_json())
    r = next(r for r in data["rounds"] if r["drafted"])
    for bad in ([1.0], [-1.0, 0.1], [True, 0.1], ["0.1", 0.1], [1e9, 0.1]):
        r["detail"]["level_seconds"] = bad
        with pytest.raises(explorer.ExplorerError, match="level_seconds must hold one finite, non-negative number"):
            explorer.load_trace(json.dumps(data))
    for round_ in data["rounds"]:  # a trace from before the levels' clocks: loads, and has no chain theory
        round_.get("detail", {}).pop("level_seconds", None)
    old = explorer.load_trace(json.dumps(data))
    assert chain_costs(old) is None and chain_words(old) == ""
    assert "hierarchical-theory" not in {v.name for v in explorer.viz.views_for(old)}


def test_level_names_from_a_file_reach_the_figure_and_words_as_text(chain_run):
    data = json.loads(chain_run.to_json())
    for round_ in data["rounds"]:
        detail = round_.get("detail", {})
        if detail.get("levels"):
            detail["levels"] = ["<b>x</b>", "[a](http://e.x)"]
    forged = explorer.load_trace(json.dumps(data))
    fig = chain_theory_figure(forged, 0)
    shown = " ".join(str(t.name) for t in fig.data) + str(fig.layout.title.text)
    assert "<b>" not in shown and "&lt;b&gt;x&lt;/b&gt;" in shown
    words = chain_words(forged)
    assert "<b>" not in words and "](http" not in words
