"""The target's 4-bit copy decoding alone (``quantized``, role alone) is named for what it is in every view: its
tokens are the copy's (unchecked, lossy), never the target's (#48: "one autoregressive target step", tokens coloured
target, "p (target)", "1.00 tokens per target pass", "each round's 0.00 extra tokens outweigh its 0.00 extra
steps"). Tiny random models: the wiring, not the speed."""

from __future__ import annotations

import pytest

import explorer
from explorer import viz
from explorer.viz.writer import writer


@pytest.fixture(scope="module")
def runs(tiny_target):
    """The copy alone and plain decoding on the same prompt (greedy)."""
    alone = explorer.decode(tiny_target, "hello there, how are you", method="quantized", quantized_role="alone",
                            max_new_tokens=12)
    plain = explorer.decode(tiny_target, "hello there, how are you", method="ar", max_new_tokens=12)
    return alone, plain


def test_its_tokens_are_the_copys_in_the_token_view(runs):
    alone, plain = runs
    html = viz.token_html(alone, len(alone.rounds) - 1)
    assert "tok-copy" in html and "tok-target" not in html
    assert "no target checked it (lossy)" in html and "target — one target token" not in html  # its legend
    caption = viz.round_caption(alone, alone.rounds[0])
    assert "4-bit copy alone" in caption and "target step" not in caption
    assert viz.fate_counts(alone.rounds[0], writer(alone).fate)["copy"] == 1
    # plain decoding is still the target's
    assert "tok-target" in viz.token_html(plain, 0) and "tok-copy" not in viz.token_html(plain, 0)


def test_the_round_detail_and_the_guided_round_name_the_copy(runs):
    alone, _ = runs
    fig = viz.round_detail_figure(alone, 0)
    assert {t.name for t in fig.data} == {"p (4-bit copy)"}
    assert "4-bit copy alone" in fig.layout.title.text and "target p" not in fig.layout.title.text
    guide = viz.guided_round_html(alone, 0)
    assert "no target checked it" in guide and "the target produced" not in guide


def test_the_status_latency_and_why_this_speed_say_what_wrote_the_text(runs):
    alone, plain = runs
    status = viz.run_summary(alone, plain)
    assert "the 4-bit copy alone, no target (lossy)" in status and "tokens per target pass" not in status
    assert "token agreement with the target's own output" in status
    why = viz.speed_explanation(alone, plain)
    assert "The 4-bit copy decoded alone" in why and "extra tokens outweigh" not in why and "0.00" not in why
    assert "no target checked its text" in why and "keeps every token of the target's text" in why
    latency = viz.latency_figure(alone, plain)
    names = {t.name for t in latency.data}
    assert "4-bit copy step (ms)" in names and "verify (ms)" not in names and "draft (ms)" not in names
    assert any("4-bit copy alone, lossy" in (t.name or "") for t in latency.data)


def test_the_trace_and_the_status_say_the_copy_wrote_the_text_alone(runs):
    alone, plain = runs
    assert "the copy alone, no target checks its text" in alone.draft_about  # in the trace file itself
    status = viz.run_summary(alone, plain)
    assert "What wrote the text: int4: the copy alone, no target checks its text" in status and "Draft used" not in status
