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
