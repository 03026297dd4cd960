"""One round, step by step (the Understand tab's guided view), from the saved traces in tests/data."""

from __future__ import annotations

import dataclasses
import re

from helpers import load

from explorer import viz
from explorer.viz.tokens import round_fates


def test_each_step_adds_one_card_and_the_newest_fades_in():
    trace = load("prompt_lookup")
    index = viz.opening_round(trace)
    for step in range(1, 5):
        shown = viz.guided_round_html(trace, index, step)
        assert len(re.findall(r"class='guide-step( new)?'", shown)) == step and shown.count("guide-step new") == 1
        assert f"data-step='{step}'" in shown and shown.count("guide-pill now") == 1
    assert viz.guided_round_html(trace, index, 9) == viz.guided_round_html(trace, index, 4)  # clipped
    assert viz.guided_round_html(trace, index, 0) == viz.guided_round_html(trace, index, 1)


def test_a_greedy_refusal_is_told_with_the_targets_own_choice():
    trace = load("prompt_lookup")
    r = trace.rounds[viz.opening_round(trace)]
    shown = viz.guided_round_html(trace, r.index, 4)
    verdicts = re.findall(r"class='verdict-(\w+)'", shown)
    assert verdicts == [f.fate for f in round_fates(r) if f.position is not None]
    assert "the target's top token here is" in shown and "its own top token" in shown
    assert f"{r.n_accepted} of {len(r.drafted)}</b> kept" in shown
    assert f"This round: {len(r.emitted)} token" in shown


def test_sampling_shows_u_against_p_over_q_and_the_residual():
    trace = load("sampled_tiny")
    r = next(x for x in trace.rounds if x.rejected_at is not None and x.uniforms)
    shown = viz.guided_round_html(trace, r.index, 4)
    i = r.rejected_at
    assert f"u = {r.uniforms[i]:.2f} > p/q = {min(r.p_drafted[i] / r.q_drafted[i], 99):.2f}" in shown
    assert "residual norm(max(0, p − q))" in shown and "keep the draft when u ≤ p/q" in shown
    full = next((x for x in trace.rounds if x.drafted and x.n_accepted == len(x.drafted) and
                 "bonus" in x.emitted_kind), None)
    if full is not None:
        assert "bonus</b> token for free" in viz.guided_round_html(trace, full.index, 4)


def test_a_round_without_draft_and_no_trace_say_what_to_do():
    trace = load("ar")
    assert "This round had no draft" in viz.guided_round_html(trace, 0, 4)
    assert "Run a prompt in the Watch tab" in viz.guided_round_html(None, 0)


def test_token_text_is_escaped():
    trace = load("prompt_lookup")
    r = trace.rounds[viz.opening_round(trace)]
    evil = dataclasses.replace(trace, token_text={**trace.token_text, r.drafted[0]: "<img src=x onerror=alert(1)>"})
    shown = viz.guided_round_html(evil, r.index, 4)
    assert "<img" not in shown and "&lt;img src=x onerror=alert(1)&gt;" in shown


def test_a_chains_draft_step_says_what_each_level_ran_not_one_step_a_token():
    """A chain's draft_forwards counts its drafted tokens (c per drafted token); the walk-through once told a
    student "8 draft steps" where the 4-bit copy ran 6 forwards and prompt lookup none."""
    import explorer

    trace = explorer.decode("tiny-random:1", "the cat sat on the mat, the cat sat on", method="hierarchical",
                            draft="prompt-lookup:2>model:tiny-random:2:1", max_new_tokens=8)
    r = next(x for x in trace.rounds if x.drafted)
    forwards = r.detail["level_forwards"]
    shown = viz.guided_round_html(trace, r.index, 1)
    assert (f"through its chain, smallest level first (prompt-lookup:2 {forwards[0]} forward"
            f"{'s' if forwards[0] != 1 else ''}, model:tiny-random:2:1 {forwards[1]} forward") in shown
    assert "draft step" not in shown + viz.guided_round_html(trace, r.index, 4)
