"""What keeping the text costs (#48): a ``quantized`` run beside the same 4-bit copy alone and plain decoding, timed
taking turns, said in words from the runs' numbers; the page opens on it, measures it after the run while Run is
free, and a new run ends that measurement. Tiny random models (the wiring); the real first run is in the browser
tests."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from helpers import page_handlers, run_values

import explorer
from explorer.quality import first_divergence, token_agreement
from explorer.ui.comparing import CLICKS, companion_system
from explorer.ui.examples import EXAMPLES
from explorer.viz.keeping import Keeping, keeping_html, keeping_words

PROMPT = "hello there, how are you today"


@pytest.fixture(scope="module")
def three(tiny_target):
    drafting = explorer.decode(tiny_target, PROMPT, method="quantized", max_new_tokens=16)
    alone = explorer.decode(tiny_target, PROMPT, method="quantized", quantized_role="alone", max_new_tokens=16)
    plain = explorer.decode(tiny_target, PROMPT, method="ar", max_new_tokens=16)
    return drafting, alone, plain


def paced(trace, tokens_per_s: float, pace=(1.6, 1.6, 1.7)):
    return dataclasses.replace(trace, pace_ms=pace, summary=dataclasses.replace(trace.summary, tokens_per_s=tokens_per_s))


def test_the_view_puts_the_three_runs_side_by_side_in_words_from_their_numbers(three):
    drafting, alone, plain = three
    k = Keeping(paced(drafting, 60.0), paced(alone, 90.0), paced(plain, 30.0))
    shown = keeping_html(k)
    assert shown.count("class='keep-row") == 3 and "keep-lossy" in shown
    assert "×2.00 plain decoding" in shown and "×3.00 plain decoding" in shown and "×1 (the reference)" in shown
    words = keeping_words(k)
    assert "Keeping the target's text cost 33% of the copy's speed" in words  # 1 − 2.00 / 3.00
    s = drafting.summary
    assert f"accepted {s.accepted}" in words and f"({s.tokens_per_target_forward:.1f} tokens a pass," in words
    parts = first_divergence(list(alone.output_ids), list(plain.output_ids))
    if parts is not None:  # the tiny model's copy parts from it: where, and how much it kept
        assert f"departs at token {parts + 1}" in shown and "Where the copy's text departs" in shown
        assert f"kept {token_agreement(list(alone.output_ids), list(plain.output_ids)):.0%}" in shown
    assert f"all {len(plain.output_ids)} tokens, identical" in shown  # drafting keeps the target's text


def test_it_says_where_keeping_the_text_goes_from_the_runs_own_clock(three):
    """#49: 4 target passes took 0.24 s, and 3 refused drafts cost 3 of the 40 steps of 7 ms (0.02 s): the checking,
    not the copy's mistakes, is the cost; the other way round when refusals cost more."""
    drafting, alone, plain = three

    def timed(verify_s, accepted):
        summary = dataclasses.replace(drafting.summary, draft_forwards=40, draft_s=0.28, target_forwards=4,
                                      verify_s=verify_s, drafted=44, accepted=accepted, wall_s=0.6,
                                      tokens_per_s=45.0, tokens_per_target_forward=(accepted + 4) / 4)
        return dataclasses.replace(drafting, pace_ms=(1.6, 1.6, 1.7), summary=summary)

    words = keeping_words(Keeping(timed(0.24, 41), paced(alone, 90.0), paced(plain, 30.0)))
    assert ("Where it goes: of the run's 0.60 s, the target's 4 passes took 0.24 s and the 3 drafts it refused had "
            "cost the copy 0.02 s: checking every token, not the copy's mistakes, is what keeping the text costs."
            ) in words
    assert "took 0.24 s and it refused none of the copy's drafts: checking" in keeping_words(
        Keeping(timed(0.24, 44), paced(alone, 90.0), paced(plain, 30.0)))
    words = keeping_words(Keeping(timed(0.01, 4), paced(alone, 90.0), paced(plain, 30.0)))
    assert "the 40 drafts it refused had cost the copy 0.28 s: the copy's refused drafts cost more" in words, words


def test_a_ratio_timed_at_another_pace_is_withheld_and_said(three):
    drafting, alone, plain = three
    k = Keeping(paced(drafting, 60.0, (6.0, 6.2, 5.9)), paced(alone, 90.0), paced(plain, 30.0))
    shown = keeping_html(k)
    assert "×2.00" not in shown and "× withheld" in shown and "×3.00 plain decoding" in shown
    assert "Not weighed against plain decoding: the drafting run (the machine was busy" in keeping_words(k)
    assert "data-drafting='withheld'" in shown


def test_the_page_opens_on_the_fastest_lossless_method_with_the_story_ready():
    first = EXAMPLES[0]
    assert (first.method, first.draft, first.controller, first.gamma) == ("quantized", "int4", "heuristic", 8)
    assert explorer.method_preset is not None  # its preset is what the page's γ and controller start on
    from explorer.methods.quantized import PRESET
    assert (PRESET["draft"], PRESET["controller"], PRESET["gamma"]) == (first.draft, first.controller, first.gamma)
    page = page_handlers().page
    assert page.method.value == "quantized" and page.draft.value == "int4" and page.prompt.value == first.prompt
    assert page.keeping.visible and "What keeping the text costs" in page.keeping.value


def test_a_quantized_run_stands_beside_its_other_role():
    run = SimpleNamespace(method="quantized", draft="int4", rounds=(1,), settings=SimpleNamespace(
        options={"role": "draft"}, controller="heuristic", gamma=8))
    assert companion_system(run) == "quantized:int4:alone"
    alone = SimpleNamespace(**{**run.__dict__, "settings": SimpleNamespace(
        options={"role": "alone"}, controller="heuristic", gamma=8)})
    assert companion_system(alone) == "quantized:int4/heuristic@8"
    assert companion_system(SimpleNamespace(method="suffix", draft=None, rounds=(1,), settings=None)) is None


def test_after_a_run_the_page_is_free_and_the_comparison_is_drawn_or_ended_by_a_new_run(tiny_target):
    """The run gives Run back when its rounds end; its comparison (plain decoding and the copy alone, taking turns)
    then fills the view; a newer click ends a comparison still under way, and keeps the newer run's Stop."""
    handlers = page_handlers()
    page = handlers.page
    values = run_values(page, {page.model: "tiny-random", page.prompt: "the cat sat on the mat, the cat sat",
                               page.max_new_tokens: 12, page.method: "quantized", page.draft: "int4"})
    request = SimpleNamespace(session_hash="keeping-test")
    handlers.ask(request)
    updates = list(handlers.run(values, request))
    freed = [u for u in updates if getattr(u.get(page.run_btn), "interactive", None)]
    assert freed and "Run is free again" in freed[0][page.status]
    drawn = [u for u in updates if getattr(u.get(page.keeping), "visible", None)]
    final = drawn[-1][page.keeping].value
    assert "What keeping the text costs" in final and final.count("class='keep-row") == 3
    assert "taking turns on the CPU" in final
    assert handlers.ran(request).interactive is True  # the last chain of the session: Run comes back

    # a new click while the comparison measures: the older run stops there, silently, and leaves Run to the new one
    values[page.prompt] = "a different prompt, so nothing is cached for it"
    handlers.ask(request)
    older = handlers.run(values, request)
    for update in older:
        if getattr(update.get(page.run_btn), "interactive", None):
            break  # the run's rounds ended: it is measuring its comparison now
    handlers.ask(request)  # Run clicked again
    assert list(older) == []  # the older run's comparison ends without a word over the newer run's page
    assert handlers.ran(request) == {"__type__": "update"}  # a run of this session is still under way: Run stays
    assert handlers.ran(request).interactive is True
    assert CLICKS.latest("keeping-test") == 0  # forgotten once no run is open


def test_choosing_the_copy_alone_marks_the_banner_lossy():
    """#48: with the copy's role set to alone the banner still read as a lossless method's."""
    handlers = page_handlers()
    page = handlers.page
    values = run_values(page, {page.method: "quantized"})
    values[page.options.controls["quantized_role"]] = "alone"
    assert "Lossy method" in handlers.options_changed(values)[page.banner]
    values[page.options.controls["quantized_role"]] = "draft"
    assert "Lossy method" not in handlers.options_changed(values)[page.banner]
