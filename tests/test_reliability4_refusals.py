"""Issue 51, item 5: a refusal names what the method accepts. ``quantized`` with draft ``int5`` listed every draft
kind the explorer has; it takes int4 or int8. Every method that takes only some kinds says which, for a kind it
does not take and for one that does not exist alike; the methods that take any kind list every form."""

from __future__ import annotations

import pytest

import explorer
from explorer import methods
from explorer.drafts import draft_forms
from explorer.errors import ExplorerError

UNKNOWN = ("int5", "bogus:1", "int4x")


def refusal(method: str, draft: str, **options) -> str:
    with pytest.raises(ExplorerError) as refused:
        explorer.decode("tiny-random:1", "abc", method=method, draft=draft, max_new_tokens=1, **options)
    said = str(refused.value)
    assert "\n" not in said and len(said) <= 300, said
    return said


@pytest.mark.parametrize("draft", UNKNOWN)
def test_quantized_says_it_takes_int4_or_int8(draft):
    for options in ({}, {"quantized_role": "alone"}):
        said = refusal("quantized", draft, **options)
        assert "int4 or int8" in said and "prompt-lookup" not in said and "feature-head" not in said, said


def test_every_method_that_takes_some_kinds_names_them_for_any_other():
    every = methods.discover()
    restricted = [m for m in every.values() if m.draft != "none" and m.draft_kinds() is not None]
    assert {"quantized", "bild", "beam", "hierarchical"} <= {m.name for m in restricted}
    for method in restricted:
        for draft in UNKNOWN:
            said = refusal(method.name, draft)
            assert said.startswith(f"{method.name} cannot run the draft") and method.draft_words in said, said
            assert draft_forms() not in said, said  # not every kind: the ones it takes


def test_a_method_that_takes_any_kind_lists_every_form_for_an_unknown_one():
    for name in ("speculative", "lenient"):
        assert draft_forms() in refusal(name, "int5")


def test_the_race_and_bench_name_what_quantized_takes():
    from explorer.race import parse_lanes

    with pytest.raises(ExplorerError, match=r"quantized\[:int4\|int8\]"):
        parse_lanes(["quantized:int5"])
