"""Run pressed right after the method changed (``ui.controls.draft_left_behind``): the drafter box may still hold
the previous method's drafter when the run reads it. Where the new method refuses that drafter and it is one the
page itself put there (a method's default or preset), the run takes the new method's own drafter, shows it in the
box and says so; a drafter the user typed is never replaced: the run refuses it in its own words."""

from types import SimpleNamespace

from helpers import page_handlers, run_values

import explorer
from explorer.ui.controls import draft_left_behind


def test_a_drafter_the_page_left_for_another_method_gives_way_to_the_methods_own():
    assert draft_left_behind("hierarchical", "default", "int4") == "prompt-lookup:3>int4"  # quantized's, left behind
    assert draft_left_behind("speculative", "default", "prompt-lookup:3>int4") == "prompt-lookup:3"
    assert draft_left_behind("quantized", "default", "early-exit:4") == "int4"
    assert draft_left_behind("bild", "default", "prompt-lookup:3") == "early-exit:8"
    # the box the page emptied for a method that drafts by itself (eagle-tree, then bild: the suite's figure test
    # pressed Run before bild's drafter reached the box, and the run refused the empty box)
    assert draft_left_behind("bild", "default", "") == "early-exit:8"
    assert draft_left_behind("hierarchical", "default", "  ") == "prompt-lookup:3>int4"
    assert draft_left_behind("eesd", "default", None) == explorer.method_preset("eesd", "default")["draft"]


def test_a_drafter_the_method_runs_or_the_user_typed_is_kept():
    assert draft_left_behind("speculative", "default", "int4") is None  # speculative runs the copy too
    assert draft_left_behind("hierarchical", "default", "model:tiny-random:2") is None  # typed: refused by the run
    assert draft_left_behind("suffix", "default", "int4") is None  # drafts by itself: the box is not read
    assert draft_left_behind("no-such-method", "default", "int4") is None


def test_run_pressed_before_the_drafter_followed_the_method_runs_the_methods_drafter():
    handlers = page_handlers()
    page = handlers.page
    values = run_values(page, {page.model: "tiny-random", page.prompt: "the cat sat on the mat", page.max_new_tokens: 6,
                               page.method: "hierarchical", page.draft: "int4"})  # what the box held on quantized
    request = SimpleNamespace(session_hash="method-switch-test")
    handlers.ask(request)
    updates = list(handlers.run(values, request))
    shown = [u[page.draft].value for u in updates if page.draft in u]
    assert shown == ["prompt-lookup:3>int4"]
    said = updates[0][page.status].replace("\\", "")  # Markdown's escapes off: the words a visitor reads
    assert "hierarchical runs its drafter prompt-lookup:3&gt;int4: the box still held int4" in said
    trace = next(u[page.trace_state] for u in reversed(updates) if u.get(page.trace_state) is not None)
    assert trace.method == "hierarchical" and trace.draft == "prompt-lookup:3>int4"
    assert not any("⚠️" in str(u.get(page.status, "")) for u in updates)


def test_a_drafter_the_user_typed_is_refused_in_one_line_not_replaced():
    handlers = page_handlers()
    page = handlers.page
    values = run_values(page, {page.model: "tiny-random", page.prompt: "the cat sat on the mat", page.max_new_tokens: 6,
                               page.method: "hierarchical", page.draft: "model:tiny-random:2"})
    request = SimpleNamespace(session_hash="method-switch-typed")
    handlers.ask(request)
    updates = list(handlers.run(values, request))
    assert not any(page.draft in u for u in updates)
    status = updates[-1][page.status]
    assert status.startswith("⚠️") and "\n" not in status.strip() and "Traceback" not in status


def test_run_pressed_while_the_box_is_still_empty_from_a_method_without_a_drafter_runs_the_methods_drafter():
    handlers = page_handlers()
    page = handlers.page
    values = run_values(page, {page.model: "tiny-random", page.prompt: "the cat sat on the mat", page.max_new_tokens: 6,
                               page.method: "speculative", page.draft: ""})  # what the box held on eagle-tree
    request = SimpleNamespace(session_hash="method-switch-empty")
    handlers.ask(request)
    updates = list(handlers.run(values, request))
    assert [u[page.draft].value for u in updates if page.draft in u] == ["prompt-lookup:3"]
    said = updates[0][page.status].replace("\\", "")
    assert "speculative runs its drafter prompt-lookup:3: the box was still empty from a method that drafts by itself" in said
    trace = next(u[page.trace_state] for u in reversed(updates) if u.get(page.trace_state) is not None)
    assert trace.method == "speculative" and trace.draft == "prompt-lookup:3"
    assert not any("⚠️" in str(u.get(page.status, "")) for u in updates)
