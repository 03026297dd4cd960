"""The record of one decoding method (``Method``): everything the API, CLI, benchmark, race, page, glossary and trace
loader know of it, and the checks they share (its drafts, its options, a loaded trace's rounds).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from ..drafts import KINDS, draft_kind
from ..errors import ExplorerError
from ..limits import clip
from ..trace import MethodRules
from ..untrusted import Record
from .options import Options
from .registry import discover
from .request import Request, SessionState
from .sweep_record import Sweep
from .systems import parse_system
from .trainer import Trainer


@dataclass(frozen=True)
class Method:
    """One decoding method: everything the API, CLI, benchmark, race, page, glossary and trace loader know
    of it. ``start(request, options)`` returns the run as an ``explorer.run.Decoding``.

    ``draft``: "required" (speculative, eesd, bild) or "none" (ar, bita); ``drafts``: the draft kinds it
    runs (``explorer.drafts``: ``model``, ``early-exit``, ``prompt-lookup``, ``feature-head``, ``chain``
    for ``a>b``; None: every kind but a chain; or a function of the options giving them), refused
    otherwise with ``draft_words`` saying why; ``default_draft`` the draft the page switches to when the
    one in its box is not one of them;
    ``controller``: whether γ and the draft-length controller apply (``gamma`` says otherwise for γ
    alone); ``preset(target)``: defaults for draft, controller and γ that this method fills in for a model
    (eesd's shipped preset), else None.

    ``lossy``: True, False, or a function of the options (lenience is exact at l = 1); the run records
    the answer as ``settings.lossy``. ``detail``: the keys of a round's ``detail`` its views read, each of
    its kind (``explorer.untrusted.Record``); ``check_round(round_data, path)`` what a loaded round must
    satisfy beyond that; ``round_tokens(round)`` the token ids a round names beyond the common fields
    (their text goes into the trace). ``system``: how the benchmark and the race name a run of it after
    ``<name>:`` (``parse_system``; None: ``<draft>[/controller]`` where it takes a draft, nothing else),
    and ``system_syntax`` that in words. ``glossary``: its words for the page's glossary (markdown);
    ``trainers``: the offline trainers of its draft (``python -m explorer train``); ``paper``: the paper it
    follows, cited short ("Leviathan et al. 2023"; the README's methods table, ``methods.table``);
    ``session_state``: what it keeps of a session's earlier runs, for the page to hand a GPU worker and take back
    (``registry.export_sessions``), None where it keeps nothing; ``sweeps``: its sweeps over its own dials
    (``python -m explorer sweep <name>``, the page's sweep sections; ``sweep_record.py``, run by ``explorer.sweep.run``)."""

    name: str
    summary: str
    lossy: bool | Callable[[Any], bool]
    options: type[Options] | None
    start: Callable[[Request, Any], Any]
    draft: str = "required"
    drafts: tuple[str, ...] | Callable[[Any], tuple[str, ...]] | None = None
    default_draft: str | None = "prompt-lookup:3"
    draft_words: str = ""
    controller: bool = True
    gamma: bool | None = None  # whether γ applies; None: where the controller does
    preset: Callable[[Any], dict] | None = None
    detail: Record | None = None
    check_round: Callable[[dict, str], None] | None = None  # a loaded trace's round, beyond the common checks
    round_tokens: Callable[[Any], list[int]] | None = None
    system: Callable[[str], dict[str, Any]] | None = None
    system_syntax: str = ""
    glossary: str = ""
    trainers: tuple[Trainer, ...] = ()
    paper: str = ""
    session_state: SessionState | None = None
    sweeps: tuple[Sweep, ...] = ()

    def is_lossy(self, options: Options | None) -> bool:
        """Whether a run with these options may differ from the target's own output."""
        return bool(self.lossy(options) if callable(self.lossy) else self.lossy)

    @property
    def uses_gamma(self) -> bool:
        return self.controller if self.gamma is None else self.gamma

    def draft_kinds(self, options: Options | None = None) -> tuple[str, ...] | None:
        """The draft kinds this method runs with these options (None: every kind but a chain)."""
        return self.drafts(options) if callable(self.drafts) else self.drafts

    def accepts_draft(self, spec: str | None, options: Options | None = None) -> bool:
        """Whether ``spec`` (a draft spec string) is a draft this method runs; an empty one is not."""
        if self.draft == "none" or not spec or not str(spec).strip():
            return False
        kinds, kind = self.draft_kinds(options), draft_kind(str(spec))
        return kind in kinds if kinds is not None else kind != "chain"

    def check_draft(self, spec, options: Options | None = None) -> None:
        """``ExplorerError`` with one line when a draft spec (a string) is not one this method runs."""
        if isinstance(spec, str) and self.draft != "none" and not self.accepts_draft(spec, options):
            kind = draft_kind(spec)
            if kind == "chain":
                chained = [m.name for m in discover().values() if "chain" in (m.draft_kinds() or ())]
                raise ExplorerError(f"{clip(spec, 60)} is a draft chain (smaller>larger): run it with method "
                                    f"{' or '.join(chained)}")
            if kind in KINDS or self.draft_kinds(options) is not None:  # an unknown kind too: say what it takes
                why = self.draft_words or f"{self.name} runs {', '.join(self.draft_kinds(options) or ())} drafts"
                raise ExplorerError(f"{self.name} cannot run the draft {clip(spec, 60)}: {why}")

    def check_options(self, values: dict[str, Any]) -> Options | None:
        """A trace's ``settings.options`` (field names) as this method's options; ``ExplorerError`` for a
        name it does not have or a value out of its range."""
        names = {f.name for f in dataclasses.fields(self.options)} if self.options is not None else set()
        unknown = sorted(set(values) - names)
        if unknown:
            raise ExplorerError(f"{self.name} has no option {clip(unknown[0], 40)}")
        return self.options(**values) if self.options is not None else None

    def trace_rules(self) -> MethodRules:
        return MethodRules(self.check_options, self._check_round, lambda options: self.is_lossy(
            self.check_options(options)))

    def _check_round(self, data: dict, path: str) -> None:
        records = [self.detail] + ([kind.detail for kind in KINDS.values()] if self.draft != "none" else [])
        for record in records:
            if record is not None:
                record.check(data.get("detail", {}), f"{path}.detail")
        if self.check_round is not None:
            self.check_round(data, path)

    def make_options(self, given: dict[str, Any]) -> Options | None:
        """This method's options from keywords (``<prefix><field>``); the defaults where not given."""
        if self.options is None:
            return None
        prefix = self.options.prefix
        return self.options(**{k[len(prefix):]: v for k, v in given.items()})

    def keywords(self) -> dict[str, dataclasses.Field]:
        """keyword → field of every option (``bita_tree`` → the ``tree`` field)."""
        if self.options is None:
            return {}
        return {self.options.prefix + f.name: f for f in dataclasses.fields(self.options)}

    def default_system(self) -> str | None:
        """How the benchmark and the race name a run of this method with its defaults (None where its
        grammar needs more than its name and its default draft)."""
        name = self.name if self.draft == "none" or self.preset is not None else f"{self.name}:{self.default_draft}"
        try:
            return name if parse_system(name) is not None else None
        except ExplorerError:
            return None

    def syntax(self) -> str:
        """How the benchmark and the race name a run of this method (``speculative:<draft>[/controller][@γ]``)."""
        if self.system_syntax:
            return self.system_syntax
        rest = ""
        if self.draft != "none":
            rest = ":<draft>" + ("[/controller]" if self.controller else "")
            rest = f"[{rest}]" if self.preset is not None else rest
        return self.name + rest + ("[@γ]" if self.uses_gamma else "")
