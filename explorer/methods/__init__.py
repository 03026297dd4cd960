"""The method registry: every decoding method is one record, written in one module of this package.

A record (``Method``) names the method, says in one line what it does and whether it is lossy, declares
its own options (an ``Options`` dataclass whose fields carry their default, range, help text and paper
reference, see ``option``) and how a run starts (``start``). From the records come ``explorer.METHODS``,
the method keywords of ``decode``/``stream`` (``<prefix><field>``, e.g. ``bita_tree``), the CLI flags of
``run`` (``--bita-tree``), the page's per-method options and the options a trace records.

Adding a method: one module here that calls ``register`` (``ar.py`` is the smallest), a view module in
``explorer/viz/views`` when it has its own picture, and a test file. Nothing else changes.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import pkgutil
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Callable

from ..engine.sampling import Rng, SamplingConfig
from ..drafts import KINDS, draft_kind
from ..trace import MethodRules, Settings
from ..errors import ExplorerError
from ..limits import MAX_SPEC_CHARS, clip
from ..models import LoadedModel
from ..untrusted import Record


# -- options --------------------------------------------------------------------------------------------


def option(default, help: str, *, kind: type | None = None, paper: str = "", low: float | None = None,
           high: float | None = None, choices: tuple[str, ...] | None = None, none: str = "",
           infinite: bool = False, label: str = "", symbol: str = "", slider: tuple | None = None,
           page: bool = True):
    """A field of an ``Options`` dataclass: its default and everything a person or a form needs to know.

    ``kind`` is int, float or str (default: the default's type); ``low``/``high`` bound a number
    (inclusive); ``choices`` the words a text may be; ``none`` says what an absent value (None) means and
    allows it; ``infinite`` allows ∞ for a float; ``label`` is the short name forms show; ``symbol`` the
    paper's (α_FB), named in error messages beside the keyword; ``slider`` (low, high, step) the range a
    form offers on a slider (default: a number box); ``page=False`` keeps it off the web page (a server
    path, say)."""
    kind = kind or type(default)
    if kind not in (int, float, str):
        raise TypeError(f"an option is an int, a float or a str, not {kind.__name__}")
    meta = {"help": help, "kind": kind, "paper": paper, "low": low, "high": high, "choices": choices, "none": none,
            "infinite": infinite, "label": label, "symbol": symbol, "slider": slider, "page": page}
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class Options:
    """Base of a method's options: each field is checked against its ``option`` metadata on creation
    (``ExplorerError`` with one line naming the keyword, the allowed values and what was given)."""

    prefix = ""  # keyword prefix of the fields in decode/stream and the CLI (``bita_`` → ``bita_tree``)
    title = ""  # the heading of the method's options on the page

    def __post_init__(self):
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _checked(self.prefix + f.name, getattr(self, f.name), f))

    def as_dict(self) -> dict[str, Any]:
        """The options as the trace records them (keyed by field name)."""
        return dataclasses.asdict(self)


def _checked(keyword: str, value, f: dataclasses.Field):
    meta = f.metadata
    keyword += f" ({meta['symbol']})" if meta["symbol"] else ""
    if value is None:
        if meta["none"]:
            return None
        raise ExplorerError(f"{keyword} needs a value ({describe(f)})")
    kind = meta["kind"]
    if kind is str:
        if not isinstance(value, str):
            raise ExplorerError(f"{keyword} must be text ({describe(f)}), got {clip(value)}")
        value = value.strip()
        if len(value) > MAX_SPEC_CHARS:
            raise ExplorerError(f"{keyword} has {len(value)} characters; at most {MAX_SPEC_CHARS}: {clip(value, 40)}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:  # a lone surrogate cannot reach the page, the trace file or the log
            raise ExplorerError(f"{keyword} is not valid text (character {err.start + 1} is a lone surrogate)") from None
        if meta["choices"] is not None and value not in meta["choices"]:
            raise ExplorerError(f"{keyword} must be one of {', '.join(meta['choices'])}, got {clip(value, 40)}")
        return value
    whole = kind is int
    number_ok = isinstance(value, int) if whole else isinstance(value, (int, float))
    if not number_ok or isinstance(value, bool) or (not whole and math.isnan(value)):
        raise ExplorerError(f"{keyword} must be {'a whole number' if whole else 'a number'} ({describe(f)}), "
                            f"got {clip(value)}")
    if math.isinf(value) and meta["infinite"]:
        return float(value)
    low, high = meta["low"], meta["high"]
    if math.isinf(value) or (low is not None and value < low) or (high is not None and value > high):
        raise ExplorerError(f"{keyword} must be {describe(f)}, got {clip(value)}")
    return int(value) if whole else float(value)


def describe(f: dataclasses.Field, with_none: bool = True) -> str:
    """The allowed values of an option in words: "from 0 to 1", "one of a, b", "≥ 0, or inf"; and what
    no value means, unless ``with_none`` is off."""
    meta = f.metadata
    words = []
    if meta["choices"] is not None:
        words.append("one of " + ", ".join(meta["choices"]))
    elif meta["low"] is not None and meta["high"] is not None:
        words.append(f"from {meta['low']:g} to {meta['high']:g}")
    elif meta["low"] is not None:
        words.append(f"≥ {meta['low']:g}")
    elif meta["kind"] is str:
        words.append("text")
    if meta["infinite"]:
        words[-1] += ", or inf"
    if meta["none"] and with_none:
        words.append(f"none: {meta['none']}")
    return "; ".join(words)


# -- methods ---------------------------------------------------------------------------------------------


@dataclass
class Request:
    """What every method starts from, resolved and checked by ``explorer.api.stream``."""

    target: LoadedModel
    prompt: str | None
    prompt_ids: list[int]
    sampling: SamplingConfig
    settings: Settings  # the common knobs; a method replaces what it decides itself (BiLD's γ is its cap)
    draft: Any  # the draft's spec or model object (None where the method takes none)
    load: Callable[[Any], LoadedModel]  # model spec or object -> loaded model (shared, cached)
    round_tokens: Callable[[Any], list[int]] | None = None  # the method record's: ids a round names (its trace)
    session: str = ""  # who is decoding (the page's session): a method that learns from earlier runs keeps it apart

    @property
    def seed(self) -> int:
        return self.settings.seed

    def rng(self) -> Rng:
        return Rng(self.settings.seed)


@dataclass(frozen=True)
class Trainer:
    """An offline trainer of a method's draft: ``python -m explorer train <name>``. ``add_arguments(parser)``
    declares its flags; ``run(args, argv)`` trains, prints one line per artifact and returns the exit status
    (``argv``: the command line, written into each artifact's manifest)."""

    name: str
    help: str
    description: str
    add_arguments: Callable[[Any], None]
    run: Callable[[Any, list[str]], int]


def answer_flags(parser) -> None:
    """The flags of every trainer that learns from the target's own answers to the prompt bank: the
    answers' length cap, the bank, and where and in which dtype the target runs."""
    parser.add_argument("--max-new-tokens", type=int, default=256, help="length cap of the target's answers")
    parser.add_argument("--prompts", help="a prompt bank JSON file like assets/train_prompts.json (default: that file)")
    parser.add_argument("--device", help="cpu | cuda (default: cuda when present)")
    parser.add_argument("--dtype", default="float32", help="the target's dtype while training (default float32: "
                                                          "what decoding on the CPU runs)")


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
    follows, cited short ("Leviathan et al. 2023"; the README's methods table, ``methods.table``)."""

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


_REGISTRY: dict[str, Method] = {}


def register(method: Method) -> Method:
    """Add a method (the order of registration is the order the CLI and the page list them in)."""
    _REGISTRY[method.name] = method
    return method


# listed first, in this order; then any others
ORDER = ("ar", "speculative", "quantized", "eesd", "eagle", "eagle-tree", "bild", "bita", "suffix", "lookahead", "lenient",
         "hierarchical", "beam", "synthetic")


_discovered = False


def discover() -> dict[str, Method]:
    """Import every module of this package once (each registers its method); the methods by name, in
    ``ORDER`` and then in the order they registered."""
    global _discovered
    if not _discovered:
        # eesd first, as ever: its early-exit stays the third draft kind in every list (after model: and prompt-lookup:)
        for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name != "eesd"):
            importlib.import_module(f"{__name__}.{module.name}")
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
