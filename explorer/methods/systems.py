"""How the benchmark and the race name a run: ``<method>[:<rest>][@γ]`` (``parse_system``), each method's rest its
own (``Method.system``; ``numbered_system`` for the common ``<name>[:a[:b]]``).
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import ExplorerError
from ..limits import clip
from .registry import discover


def parse_system(name: str) -> dict[str, Any] | None:
    """A run named as the benchmark and the race name them, ``<method>[:<rest>][@γ]``, as ``decode``
    keywords (method, draft, gamma, controller and the method's own options); None when ``name`` names
    no registered method. What follows ``<method>:`` is the method's (``Method.system``), by default
    ``<draft>[/controller]``; ``@γ`` sets its own draft length where the method has one. ``ExplorerError``
    (one line, the method's syntax) for a malformed rest."""
    spec, at, own_gamma = name.rpartition("@")
    if not at:
        spec = name
    method_name, colon, rest = spec.partition(":")
    method = discover().get(method_name)
    if method is None:
        return None
    bad = ExplorerError(f"bad system {clip(name, 60)}: write {method.syntax()}")
    keywords: dict[str, Any] = {"method": method.name}
    if at:
        if not (method.uses_gamma and own_gamma.isdigit() and int(own_gamma) >= 1):
            raise bad
        keywords["gamma"] = int(own_gamma)
    if method.system is not None:
        keywords |= method.system(rest)
    elif method.draft == "none":
        if colon:
            raise bad
    else:
        draft, slash, controller = rest.partition("/")
        if (slash and not (method.controller and controller)) or (not draft and (method.preset is None or colon)):
            raise bad
        keywords |= ({"draft": draft} if draft else {}) | ({"controller": controller} if controller else {})
    method.make_options({k: v for k, v in keywords.items() if k in method.keywords()})  # its values checked now
    return keywords


def numbered_system(name: str, keywords: tuple[str, ...], syntax: str) -> Callable[[str], dict[str, Any]]:
    """A ``Method.system`` for ``<name>[:a[:b …]]``: whole numbers, in order, as ``keywords``."""
    def system(rest: str) -> dict[str, Any]:
        parts = rest.split(":") if rest else []
        if len(parts) > len(keywords) or not all(p.isdigit() for p in parts):
            raise ExplorerError(f"bad system {clip(name + ':' + rest, 60)}: write {syntax}")
        return dict(zip(keywords, map(int, parts)))

    return system
