"""The registry of methods: each method's module calls ``register`` with its record, ``discover`` imports them all
(nothing outside this package names one), and the registry answers for all of them: by name, in the page's order,
their trainers, their sweeps, their keywords, and what each keeps of a session's earlier runs.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..drafts import order_kinds
from ..errors import ExplorerError
from ..limits import clip
from ..trace import MethodRules

if TYPE_CHECKING:
    from .options import Options
    from .record import Method
    from .sweep_record import Sweep
    from .trainer import Trainer

_REGISTRY: dict[str, Method] = {}


def register(method: Method) -> Method:
    """Add a method (the order of registration is the order the CLI and the page list them in)."""
    _REGISTRY[method.name] = method
    return method


# listed first, in this order; then any others
ORDER = ("ar", "speculative", "quantized", "eesd", "eagle", "eagle-tree", "bild", "bita", "suffix", "lookahead", "lenient",
         "hierarchical", "beam", "synthetic")


# the draft kinds (``explorer.drafts``) in every list, these first, in this order; then any others as they registered
DRAFT_KIND_ORDER = ("model", "prompt-lookup", "early-exit", "feature-head", "int4", "int8")

_discovered = False


def discover() -> dict[str, Method]:
    """Import every module of this package once (each registers its method and its draft kinds); the methods by
    name, in ``ORDER`` and then in the order they registered. The draft kinds are put in ``DRAFT_KIND_ORDER``."""
    global _discovered
    if not _discovered:
        for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
            importlib.import_module(f"{__package__}.{module.name}")
        order_kinds(DRAFT_KIND_ORDER)
        _discovered = True
    ranked = sorted(_REGISTRY.values(), key=lambda m: ORDER.index(m.name) if m.name in ORDER else len(ORDER))
    return {m.name: m for m in ranked}


def get(name: str) -> Method:
    """The method called ``name``; ``ExplorerError`` naming the methods otherwise."""
    methods = discover()
    if name not in methods:
        raise ExplorerError(f"unknown method {clip(name, 40)}: use one of {', '.join(methods)}")
    return methods[name]


def trace_rules() -> dict[str, MethodRules]:
    """name → what a trace of that method must satisfy beyond the common fields (``explorer.load_trace``)."""
    return {name: m.trace_rules() for name, m in discover().items()}


def split_options(method: Method, given: dict[str, Any]) -> Options | None:
    """``method``'s options from the method keywords a call gave; a keyword of another method (or of
    none) is refused with one line saying whose it is."""
    own = method.keywords()
    for keyword in given:
        if keyword not in own:
            owners = [m.name for m in discover().values() if keyword in m.keywords()]
            if owners:
                raise ExplorerError(f"{keyword} is an option of {' and '.join(owners)}, not of {method.name}")
            raise ExplorerError(f"unknown keyword {clip(keyword, 40)}")
    return method.make_options(given)


def export_sessions(session: str | None) -> dict[str, Any]:
    """What every method keeps of ``session``'s earlier runs (``Method.session_state``), as plain data by method
    name: what a GPU worker, another process, is handed (and hands back to ``replace_sessions``)."""
    return {name: m.session_state.export(session) for name, m in discover().items() if m.session_state is not None}


def replace_sessions(session: str | None, states: dict[str, Any]) -> None:
    """Each method's memory of ``session`` becomes what ``states`` (``export_sessions``'s form) holds for it; a
    method it does not name keeps its own."""
    methods = discover()
    for name, data in states.items():
        method = methods.get(name)
        if method is not None and method.session_state is not None:
            method.session_state.replace(session, data)


def sweeps() -> dict[str, tuple[Method, Sweep]]:
    """Every method's sweeps by name (``python -m explorer sweep <name>``), in the methods' order, each with the
    method it decodes; ``ExplorerError`` where two methods declare one name."""
    found: dict[str, tuple[Method, Sweep]] = {}
    for method in discover().values():
        for sweep in method.sweeps:
            if sweep.name in found:
                raise ExplorerError(f"two methods declare the sweep {sweep.name}: {found[sweep.name][0].name} and "
                                    f"{method.name}")
            found[sweep.name] = (method, sweep)
    return found


def trainers() -> list[Trainer]:
    """Every method's offline trainers, in the methods' order."""
    return [t for m in discover().values() for t in m.trainers]


def system_syntax() -> str:
    """Every method's benchmark and race syntax, for messages and help."""
    return ", ".join(m.syntax() for m in discover().values())


class Summaries(Mapping):
    """name → one-line description of every registered method, read from the registry at each use (so
    a method registered later is there too): ``explorer.METHODS``."""

    def __getitem__(self, name: str) -> str:
        return discover()[name].summary

    def __iter__(self):
        return iter(discover())

    def __len__(self) -> int:
        return len(discover())

    def __repr__(self) -> str:
        return repr(dict(self))
