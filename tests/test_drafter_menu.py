"""The drafter menu and the examples offer what ships (#42 item 2): the factual-QA example drafted with an
untrained exit (early-exit:16, where exits ship at 4, 6, 8 and 12), the menu offered 8, 16 and 24 and left out 4, 6
and 12, and the warning blamed the weights ("No trained draft ships for these weights") instead of naming what
was missing. Also #42 item 7: the status named internal files (``llama-L30-H576-…-n8.safetensors``)."""

from __future__ import annotations

import re

import explorer
from explorer import viz
from explorer.drafts import draft_examples
from explorer.methods.eesd.exits import ARTIFACT_DIR, shipped_depths
from explorer.ui.examples import EXAMPLES


def depths_on_disk() -> set[int]:
    """The N of every exit layer in assets/early-exit (read here from the file names, apart from the code)."""
    return {int(m.group(1)) for p in ARTIFACT_DIR.glob("*.safetensors") if (m := re.search(r"-n(\d+)\.safetensors$", p.name))}


def test_the_menu_offers_every_shipped_exit_and_labels_an_untrained_one():
    shipped = depths_on_disk()
    assert shipped == {4, 6, 8, 12} and set(shipped_depths()) == shipped
    menu = draft_examples()
    exits = [spec for spec in menu if spec.startswith("early-exit:")]
    trained = {int(spec.split(":")[1]) for spec in exits if not spec.endswith(":untrained")}
    assert trained == shipped, exits  # no untrained depth offered as if it were trained
    assert any(spec.endswith(":untrained") for spec in exits)  # one untrained choice, labelled as such


def test_every_example_drafts_with_what_ships():
    shipped = depths_on_disk()
    for example in EXAMPLES:
        if example.draft.startswith("early-exit:"):
            _, n, *variant = example.draft.split(":")
            assert int(n) in shipped and not variant, example


def test_an_exit_that_does_not_ship_names_what_is_missing_and_no_file(default_model):
    missing = explorer.stream(default_model, "Hi", draft="early-exit:16", max_new_tokens=1)
    about = missing.draft_about
    assert "no trained exit ships for 16 layers" in about and "4, 6, 8 and 12" in about, about
    words = viz.summary.draft_line(missing.trace())
    assert "No trained draft ships for these weights" not in words and "untrained" in words
    for spec in ("early-exit:8", "early-exit:4"):  # trained, with its θ_M predictor: no file names
        about = explorer.stream(default_model, "Hi", draft=spec, max_new_tokens=1).draft_about
        assert "trained exit layer" in about and ".safetensors" not in about and "llama-L30" not in about, about
    for method in ("eagle", "bita"):
        run = explorer.stream(default_model, "Hi", method=method, max_new_tokens=2).run()
        for said in (run.draft_about or "", run.draft or "", viz.run_summary(run)):
            assert ".safetensors" not in said and "llama-L30" not in said, said
        assert "trained" in run.draft_about
