"""One name for one capability: a draft "gives distributions" (q for every drafted token from a forward of its own)
is ``Drafter.gives_distributions`` on a built drafter and ``DraftKind.gives_distributions`` on its kind, and they
agree; no module spells it another way (``getattr(drafter, "runner")``, a kind's ``distributions``)."""

from __future__ import annotations

import re
from pathlib import Path

import explorer
from explorer import drafts, methods
from explorer.engine.drafters import Drafter

PACKAGE = Path(explorer.__file__).parent


def test_every_kind_says_what_its_drafters_give(tiny_target, tiny_draft):
    methods.discover()
    specs = {"model": tiny_draft, "prompt-lookup": "prompt-lookup:3", "early-exit": "early-exit:1:untrained",
             "int4": "int4", "int8": "int8"}
    built = 0
    for name, kind in drafts.KINDS.items():
        if name not in specs:  # the feature head needs a head trained for the model: none for a tiny random one
            continue
        drafter = drafts.make_drafter(specs[name], tiny_target, explorer.load)
        assert drafter.gives_distributions == kind.gives_distributions, name
        assert drafter.gives_distributions == (drafter.runner is not None), name
        built += 1
    assert built == len(specs)
    assert set(drafts.distribution_kinds()) == {"model", "early-exit", "int4", "int8"}


def test_the_capability_has_one_spelling():
    assert isinstance(Drafter.__dict__["gives_distributions"], property)  # read from the runner, never set by hand
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if re.search(r"getattr\([^)]*[\"']runner[\"']", text) or re.search(r"(?m)^\s+gives_distributions\s*=", text) \
                or re.search(r"\.distributions\b|[^_]\bdistributions=", text):
            bad.append(str(path.relative_to(PACKAGE)))
    assert not bad, f"another spelling of 'gives distributions' in {bad}"
