"""The trace: frozen per-round and per-run records, the product's data model, and nothing else.

A decode emits one ``RoundTrace`` per round and ends in a ``RunTrace``. Both are plain data (ints,
floats, strings, short tuples and small dicts) so that the UI, the plots, the CLI, the benchmark and the
tests read them without touching a model, and so that a run saved as JSON replays anywhere. This package
imports no other part of the explorer but its limits, errors and untrusted-input checks: everything
else reads it.

- ``model``: the records (``RoundTrace``, ``RunTrace``, ``Settings``, ``Summary``, ``Timing``) and α̂;
- ``invariants``: what must hold in every trace;
- ``schema``: what an uploaded file may hold, field by field (a trace file is untrusted: strangers share
  them);
- ``window``: which rows of a lookahead round's Jacobi window see which (the method's mask, the view's
  figure);
- ``migrate``: older schemas read as the current one (``@1`` files, before the method registry);
- ``read``: a file to a checked ``RunTrace`` (``RunTrace.from_json``), ``TraceFormatError`` with one
  readable line otherwise.

JSON carries ``"schema": "spec-explorer/trace@2"``.
"""

from .invariants import check_invariants
from .model import (EMITTED_KINDS, EVENTS, SCHEMA, STOP_REASONS, MethodRules, RoundTrace, RunTrace, Settings, Summary,
                    Timing, acceptance_by_position, alpha_hat)
from .read import read_dict, read_json
from .schema import check_tree

__all__ = ["EMITTED_KINDS", "EVENTS", "SCHEMA", "STOP_REASONS", "MethodRules", "RoundTrace", "RunTrace", "Settings",
           "Summary", "Timing", "acceptance_by_position", "alpha_hat", "check_invariants", "check_tree", "read_dict",
           "read_json"]
