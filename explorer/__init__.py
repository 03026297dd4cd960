"""The Speculative Decoding Explorer: a decoding engine that records every round, and views of it."""

from . import methods, trace
from .api import METHODS, Decoding, decode, method_preset, stream
from .trace import RoundTrace, RunTrace
from .errors import ExplorerError, ModelLoadError, TraceFormatError
from .models import LoadedModel, load


def load_trace(text: str | bytes) -> RunTrace:
    """A trace from its JSON text (validated, its method one of ``METHODS``; ``TraceFormatError`` for a
    malformed or foreign file)."""
    return trace.read_json(text, methods.trace_rules())


__all__ = [
    "METHODS", "Decoding", "ExplorerError", "LoadedModel", "ModelLoadError", "RoundTrace", "RunTrace",
    "TraceFormatError", "decode", "load", "load_trace", "method_preset", "stream",
]
