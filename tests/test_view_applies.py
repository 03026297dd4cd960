"""A view reads the method's trace or is not offered for it (#42 item 3): eagle-tree drafts with the feature head
too, but in a tree whose rounds carry no per-draft cosines, and the feature-head view, offered for it by its
draft's name, said "drafted nothing" every round beside a legend of lines it never drew."""

from __future__ import annotations

import dataclasses

from helpers import load

from explorer import viz


def as_feature_head_run(trace, method: str, detail) -> object:
    """``trace`` retold as a run of ``method`` with the feature head, each round's ``detail`` from ``detail(r)``."""
    rounds = tuple(dataclasses.replace(r, detail=detail(r)) for r in trace.rounds)
    return dataclasses.replace(trace, method=method, draft="feature-head", rounds=rounds)


def test_the_feature_head_view_is_offered_where_rounds_carry_its_cosines_only():
    base = load("prompt_lookup")
    linear = as_feature_head_run(base, "eagle", lambda r: {"feature_cos": [0.7] * len(r.drafted)} if r.drafted else {})
    tree = as_feature_head_run(base, "eagle-tree", lambda r: {"candidates": 6, "depth": 3, "value": [0.5]})
    assert "feature-head" in [v.name for v in viz.views_for(linear)]
    assert "feature-head" not in [v.name for v in viz.views_for(tree)]
