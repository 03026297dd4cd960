"""The Speculative Decoding Explorer: a decoding engine that records every round, and views of it.

The public names below load what they need when first used (PEP 562), so that importing the package, and
commands that need no model (``python -m explorer whatif``, ``--help``), do not import torch: that took most of
the 7.1 s the CLI's What if spent on a paste it parses in two (issue 51)."""

from __future__ import annotations

import importlib

from .errors import ExplorerError, ModelLoadError, TraceFormatError

# public name → the module that defines it
_LAZY = {"METHODS": "api", "Decoding": "api", "decode": "api", "method_preset": "api", "stream": "api",
         "RoundTrace": "trace", "RunTrace": "trace", "LoadedModel": "models", "load": "models"}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    else:
        try:  # a subpackage or module (explorer.methods, explorer.viz, …), as attribute access found it before
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def load_trace(text: str | bytes):
    """A trace from its JSON text (validated, its method one of ``METHODS``; ``TraceFormatError`` for a
    malformed or foreign file): a ``RunTrace``."""
    from . import methods, trace

    return trace.read_json(text, methods.trace_rules())


__all__ = [
    "METHODS", "Decoding", "ExplorerError", "LoadedModel", "ModelLoadError", "RoundTrace", "RunTrace",
    "TraceFormatError", "decode", "load", "load_trace", "method_preset", "stream",
]
