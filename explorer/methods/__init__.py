"""The method registry: every decoding method is one record, written in one module (or package) of this package.

A record (``Method``, ``record.py``) names the method, says in one line what it does and whether it is lossy,
declares its own options (an ``Options`` dataclass whose fields carry their default, range, help text and paper
reference, see ``option`` in ``options.py``), how a run starts from a ``Request`` (``request.py``) and, where it
has them, its trainers (``trainer.py``), its sweeps (``sweep_record.py``), how the benchmark names its runs
(``systems.py``) and what it keeps of a session's earlier runs. From the records (``registry.py``) come ``explorer.METHODS``, the method keywords of
``decode``/``stream`` (``<prefix><field>``, e.g. ``bita_tree``), the CLI flags of ``run`` (``--bita-tree``), the
page's per-method options and the options a trace records.

Adding a method: one module here that calls ``register`` (``ar.py`` is the smallest), a view module in
``explorer/viz/views`` when it has its own picture, and a test file. Nothing else changes: no module outside this
package imports a method's module (``tests/test_layering.py``).
"""

from __future__ import annotations

from .options import Options, describe, option
from .request import API_SESSION_PREFIX, Request, SessionState
from .trainer import Trainer, answer_flags
from .registry import _REGISTRY  # noqa: F401 (a test that registers a method of its own removes it again)
from .registry import (DRAFT_KIND_ORDER, ORDER, Summaries, discover, export_sessions, get, register, replace_sessions,
                       split_options, sweeps, system_syntax, trace_rules, trainers)
from .systems import numbered_system, parse_system
from .record import Method

__all__ = ["API_SESSION_PREFIX", "DRAFT_KIND_ORDER", "Method", "ORDER", "Options", "Request", "SessionState",
           "Summaries", "Trainer", "answer_flags", "describe", "discover", "export_sessions", "get", "numbered_system",
           "option", "parse_system", "register", "replace_sessions", "split_options", "sweeps", "system_syntax", "trace_rules",
           "trainers"]
