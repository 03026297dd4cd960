"""Older trace files read as the current schema: ``@1`` (before the method registry) kept BiLD's three
thresholds as fields of ``settings``; ``@2`` keeps every method's options in ``settings.options``."""

from __future__ import annotations

from .model import SCHEMA

SCHEMA_V1 = "spec-explorer/trace@1"  # settings had BiLD's three thresholds as fields; no options
V1_OPTIONS = ("fallback_threshold", "rollback_threshold", "max_small_steps")


def from_v1(data: dict) -> dict:
    """A ``@1`` trace as ``@2``: BiLD's thresholds leave the settings for ``settings.options``."""
    settings = data.get("settings")
    if not isinstance(settings, dict):
        return {**data, "schema": SCHEMA}  # the checks that follow say what is wrong
    settings = dict(settings)
    moved = {k: settings.pop(k) for k in V1_OPTIONS if k in settings}
    settings["options"] = moved if data.get("method") == "bild" else {}
    return {**data, "schema": SCHEMA, "settings": settings}
