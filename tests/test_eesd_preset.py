"""The ``eesd`` method: the shipped preset (trained exit, Thompson-sampling stop rule, γ cap) is what runs,
greedy output equals ``ar``, and a model without a trained exit gets a message saying what to do."""

import json

import pytest

import explorer
from explorer.methods.eesd import exits
from explorer.errors import ExplorerError


def test_the_preset_names_a_shipped_exit_and_a_known_controller(default_model):
    preset = explorer.method_preset("eesd", default_model.model)
    kind, n = preset["draft"].split(":")
    assert kind == "early-exit" and exits.find_exit(default_model.model, int(n)) is not None
    assert preset["controller"] in ("beta-ts", "cali-ts", "beta-ts-priced", "cali-ts-priced") and 1 <= preset["gamma"] <= 16
    assert preset["why"]
    presets = json.loads((exits.ARTIFACT_DIR / "presets.json").read_text())
    assert exits.fingerprint(default_model.model) in presets


def test_eesd_runs_the_preset_and_is_lossless(default_model):
    prompt = "Explain what a prime number is in two sentences."
    eesd = explorer.decode(default_model, prompt, method="eesd", max_new_tokens=32)
    ar = explorer.decode(default_model, prompt, method="ar", max_new_tokens=32)
    preset = explorer.method_preset("eesd", default_model.model)
    assert eesd.output_ids == ar.output_ids
    assert eesd.draft == preset["draft"] and eesd.settings.controller == preset["controller"]
    assert "trained exit layer" in eesd.draft_about
    assert eesd.summary.accepted > 0


def test_eesd_without_a_shipped_exit_says_how_to_get_one(tiny_target):
    with pytest.raises(ExplorerError, match="train early-exit"):
        explorer.decode(tiny_target, "the cat sat", method="eesd", chat=False, max_new_tokens=4)
