"""Reading a trace file: JSON parsed within its byte bound (never pickle), older schemas migrated, sizes
checked before anything is read, every field checked (``schema``), then the invariants; any problem is
``TraceFormatError`` with one readable line."""

from __future__ import annotations

from typing import Any, Mapping

from .. import limits
from ..errors import TraceFormatError
from ..gc_pause import gc_paused
from ..limits import clip
from ..untrusted import Refused, parse
from .invariants import check_invariants
from .migrate import SCHEMA_V1, from_v1
from .model import SCHEMA, MethodRules, RunTrace
from .schema import check_size, read_trace


def read_json(text: str | bytes, methods: Mapping[str, MethodRules] | None = None) -> RunTrace:
    """A trace from its JSON file, every field checked (``TraceFormatError``, one line, otherwise); ``methods``:
    the methods to accept and their own rules (``explorer.load_trace`` passes the registry's); None accepts any
    method name and checks only the common fields. Read with the garbage collector paused (``gc_pause``)."""
    with gc_paused():
        try:
            data = parse(text, limits.MAX_TRACE_BYTES)
        except Refused as err:
            raise TraceFormatError(f"not a trace file: {err}") from None
        return read_dict(data, methods)


def read_dict(data: Any, methods: Mapping[str, MethodRules] | None = None) -> RunTrace:
    """A trace from parsed JSON data, checked as ``read_json`` checks a file."""
    if not isinstance(data, dict):
        raise TraceFormatError("not a trace file: the JSON is not an object")
    schema = data.get("schema")
    if schema not in (SCHEMA, SCHEMA_V1):
        found = f"schema {clip(schema)}" if schema else "no schema field"
        raise TraceFormatError(f"not a spec-explorer trace ({found}; expected {SCHEMA!r})")
    if schema == SCHEMA_V1:
        data = from_v1(data)
    check_size(data)
    try:
        trace = read_trace(data, methods)
    except Refused as err:
        raise TraceFormatError(f"malformed trace: {err}") from None
    problems = check_invariants(trace)
    if problems:
        raise TraceFormatError(f"inconsistent trace: {problems[0]}")
    return trace
