"""The lists of preset methods and of draft kinds that the docs, the API's docstrings and the CLI's help write out
are the registry's (#50: they named eesd and eagle and not ``quantized``, and no draft list named ``int4``).

A list is written "the preset methods (``quantized``, ``eesd``, ``eagle``)" or "the draft kinds (``model:<name>``,
…)" wherever it stands, so this test finds every one; the CLI's help is generated from the registry and is read
from the parser itself."""

from __future__ import annotations

import re
from pathlib import Path

from explorer.drafts import KINDS
from explorer.methods import discover

ROOT = Path(__file__).resolve().parent.parent
WRITTEN = {path: (ROOT / path).read_text(encoding="utf-8")
           for path in ("docs/api.md", "docs/architecture.md", "explorer/api.py")}
PRESETS = re.compile(r"preset methods\s+\(([^()]*)\)")
DRAFT_KINDS = re.compile(r"draft kinds\s+\(([^()]*)\)")


def _names(listed: str) -> list[str]:
    """`quantized`, ``eesd`` → quantized, eesd; `early-exit:N[:untrained]` → early-exit."""
    return [re.split(r"[:\[]", name, maxsplit=1)[0] for name in re.findall(r"`+([^`]+)`+", listed)]


def _lists(pattern: re.Pattern, text: str) -> list[list[str]]:
    return [_names(found) for found in pattern.findall(re.sub(r"\s+", " ", text))]


def registry_presets() -> list[str]:
    return [name for name, method in discover().items() if method.preset is not None]


def _mismatch(listed: list[str], registered: list[str]) -> str:
    lacks, omits = sorted(set(listed) - set(registered)), sorted(set(registered) - set(listed))
    return (f"names {lacks} that the registry lacks " if lacks else "") + (f"omits {omits}" if omits else "")


def test_every_preset_list_is_the_registrys():
    registered = registry_presets()
    assert "quantized" in registered and "eesd" in registered and "eagle" in registered
    for path, text in WRITTEN.items():
        lists = _lists(PRESETS, text)
        assert lists, f"{path} writes no list of the preset methods"
        for listed in lists:
            assert not _mismatch(listed, registered), f"{path}'s preset list {_mismatch(listed, registered)}"


def test_every_draft_kind_list_is_the_registrys():
    discover()
    registered = list(KINDS)
    assert {"int4", "int8", "feature-head", "early-exit"} <= set(registered)
    for path in ("docs/api.md", "explorer/api.py"):
        lists = _lists(DRAFT_KINDS, WRITTEN[path])
        assert lists, f"{path} writes no list of the draft kinds"
        for listed in lists:
            assert not _mismatch(listed, registered), f"{path}'s draft-kind list {_mismatch(listed, registered)}"


def test_the_cli_help_lists_the_registrys_presets_and_draft_kinds():
    from explorer.cli import build_parser

    run = build_parser("run")._subparsers._group_actions[0].choices["run"]
    helps = {action.dest: action.help for action in run._actions}
    for dest in ("gamma", "controller"):
        listed = re.search(r"preset methods \(([^()]*)\)", helps[dest]).group(1).split(", ")
        assert listed == registry_presets(), helps[dest]
    for kind in KINDS.values():
        assert kind.form in helps["draft"], (kind.form, helps["draft"])


def test_the_check_fails_on_a_list_that_lacks_or_names_too_much():
    registered = registry_presets()
    old = "and `controller` to `fixed` (for the preset methods (`eesd`, `eagle`, `hierarchical`): the preset's)"
    assert _mismatch(_lists(PRESETS, old)[0], registered) == "omits ['quantized']"
    extra = "the preset methods (``quantized``, ``eesd``, ``eagle``, ``hierarchical``, ``medusa``)"
    assert _mismatch(_lists(PRESETS, extra)[0], registered) == "names ['medusa'] that the registry lacks "
    drafts = "one of the draft kinds (`model:<name>`, `early-exit:N[:untrained]`, `prompt-lookup:n`)"
    assert _lists(DRAFT_KINDS, drafts) == [["model", "early-exit", "prompt-lookup"]]
