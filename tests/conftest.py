"""Shared fixtures: the real default model (loaded once per test session) and tiny random models."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import explorer  # noqa: E402
from explorer.api import load_cached  # noqa: E402


@pytest.fixture(scope="session")
def default_model():
    """SmolLM2-135M-Instruct in float32 on the CPU, shared by every test (read-only)."""
    return load_cached("default", "cpu", "float32")


@pytest.fixture(scope="session")
def shipped_exit4_agreement(default_model):
    """The shipped N = 4 exit's held-out agreement, from its manifest: the controllers' starting α."""
    from explorer.methods.eesd.exits import exit_for

    agreement = exit_for(default_model.model, 4).manifest["heldout_agreement"]
    assert 0.2 < agreement < 0.8, agreement
    return agreement


@pytest.fixture(scope="session")
def tiny_target():
    return explorer.load("tiny-random:1")


@pytest.fixture(scope="session")
def tiny_draft():
    """A draft that disagrees a lot with ``tiny_target`` (another seed, one layer)."""
    return explorer.load("tiny-random:2:1")


# -- lanes -----------------------------------------------------------------------------------------------
# Every test gets its markers here, from what it uses, so a new test needs no decorator to land in a lane:
# ``browser`` when its module drives Chromium, ``model`` when it asks for the real default model, ``slow``
# when it took over ~5 s for another reason on the developers' 2-core machine (`pytest --durations=0`,
# 2026-11-25; file::test, every parametrisation).
MODEL_FIXTURES = {"default_model", "shipped_exit4_agreement"}
SLOW = {
    "test_trace_security.py::test_the_largest_trace_loads_and_draws_every_view_quickly",
    "test_space_default.py::test_without_the_package_the_default_is_the_same_model_with_its_trained_drafts",
    "test_soak.py::test_the_adversarial_soak_cancels_uploads_and_reads_the_worst_traces",
    "test_hierarchical.py::test_sampled_tokens_follow_the_target_with_three_models",
    "test_cli.py::test_out_dash_prints_the_trace_json_and_out_file_writes_it",
    "test_bench.py::test_bench_rows",
    "test_bild.py::test_sweep_trades_quality_for_cost_in_the_papers_direction",
    "test_lossless.py::test_sampled_tokens_follow_the_target_distribution",
}


def pytest_collection_modifyitems(items):
    for item in items:
        if "browser" in item.path.name or getattr(item.module, "sync_playwright", None) is not None:
            item.add_marker(pytest.mark.browser)
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.model)
        if f"{item.path.name}::{getattr(item, 'originalname', item.name)}" in SLOW:
            item.add_marker(pytest.mark.slow)
