"""A method's sweeps (``Method.sweeps``): what a sweep steps over, what one grid point asks of the method, and how the
point's decodes become a row of the report, a progress line and a table.

The sweep is declared by its method (``methods/bild/sweep.py``, ``methods/lenient/sweep.py``,
``methods/beam/sweep.py``); one runner, ``explorer.sweep.run``, decodes every point on every prompt, times it against
its baseline (plain decoding, or the baseline the method declares: Hugging Face's beam search) and applies the honesty
rule (``explorer.ratios``). A method imports no API, so its functions reach the model only through the ``Lab`` the
runner hands them. The CLI's ``sweep`` flags and the page's sweep sections read these records through the registry
(``methods.sweeps()``), so a method's sweep is found without naming its module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import ExplorerError


@dataclass(frozen=True)
class Axis:
    """One dial a sweep steps over: the name its grid reads the values by (``fallbacks``), its CLI flag
    (``--fallback``), the default values, help, and what a value may be (``whole`` numbers, from ``low`` to
    ``high``; unchecked where None)."""

    name: str
    flag: str
    default: tuple[float, ...]
    help: str
    whole: bool = False
    low: float | None = None
    high: float | None = None

    def check(self, values, said: str) -> tuple:
        """``values`` as this axis's values (whole numbers as ints); ``ExplorerError`` naming it as ``said``."""
        values = tuple(values)
        if not values:
            raise ExplorerError(f"{said} needs at least one value")
        low = float("-inf") if self.low is None else self.low
        high = float("inf") if self.high is None else self.high
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not low <= v <= high
               or (self.whole and not float(v).is_integer()) for v in values):
            kind = "whole numbers" if self.whole else "numbers"
            raise ExplorerError(f"{said} must be {kind} from {low:g} to {high:g}")
        return tuple(int(v) for v in values) if self.whole else values


@dataclass(frozen=True)
class Setting:
    """A value a sweep holds fixed over its grid (``--temperature``, ``--max-small-steps``): its name (a decode
    keyword and the report's meta key), type and help; ``default`` None: the method's own option of that name.
    ``everywhere``: every decode takes it, the baseline's too (the temperature); else the method's decodes alone
    (an option, which the sweep's ``options`` passes on)."""

    name: str
    kind: type
    help: str
    default: Any = None
    everywhere: bool = False


@dataclass(frozen=True)
class Lab:
    """What a sweep's functions may use of the run (built by the runner, since a method imports no API): the target,
    the prompts (text and ids), the draft, the new tokens per decode, and ``decode(text, **options)``: the sweep's
    method on one prompt with those options, its draft, tokens and ``everywhere`` settings filled in (a trace, not
    timed)."""

    target: Any
    texts: list[str]
    ids: list[list[int]]
    draft: str
    max_new_tokens: int
    decode: Callable[..., Any]


@dataclass(frozen=True)
class Reference:
    """What one group of points is weighed against: the baseline's output ids on each prompt, its tokens/s and the
    machine's pace while it ran (``explorer.pace``), ``name`` it in words (for the honesty rule's notes), its own
    ``row`` of the report where it is one (Hugging Face's beam search), and what the report's meta keeps of it."""

    name: str
    outputs: list[list[int]]
    tokens_per_s: float
    pace: list[float]
    row: dict | None = None
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Baseline:
    """What a sweep's points are timed against where it is not plain decoding (the runner's own): ``warm(lab)`` pays
    its first call's costs before anything is timed, ``run(lab, group)`` measures it for one group of points."""

    warm: Callable[[Lab], None]
    run: Callable[[Lab, Any], Reference]


@dataclass(frozen=True)
class Runs:
    """One grid point's decodes, one per prompt, as ``Sweep.row`` reads them: the traces, the seconds they took
    (each timed around the whole decode), the machine's pace while they ran, the ``reference`` they are timed
    against, the outputs their text is weighed against (``against``: the reference's, or the sweep's ``exact``
    ones) and the lab."""

    traces: list
    seconds: float
    pace: list[float]
    reference: Reference
    against: list[list[int]]
    lab: Lab


@dataclass(frozen=True)
class Sweep:
    """One sweep of a method: ``python -m explorer sweep <name>`` and the page's section of it.

    ``axes`` the dials; ``grid(values)`` the points, in the order they run, from the axes' values by name (each
    point a dict the other functions read); ``options(point, settings)`` one point as the method's decode keywords;
    ``row(point, runs)`` its row of the report; ``words(row, lab)`` the row in a progress line; ``table(report)`` the
    report as markdown. ``group(point)``: points weighed against one reference (beam search: one width; default:
    all); ``baseline`` what they are timed against (None: plain decoding, ``ar``); ``exact(lab, settings,
    reference)`` the outputs a point's text is weighed against where not the reference's (None: the reference's);
    ``finish(rows)`` marks over every row (BiLD's Pareto front)."""

    name: str
    help: str
    axes: tuple[Axis, ...]
    grid: Callable[[dict], list[dict]]
    options: Callable[[dict, dict], dict]
    row: Callable[[dict, Runs], dict]
    words: Callable[[dict, Lab], str]
    table: Callable[[dict], str]
    settings: tuple[Setting, ...] = ()
    group: Callable[[dict], Any] = lambda point: None
    baseline: Baseline | None = None
    exact: Callable[[Lab, dict, Reference], list[list[int]] | None] | None = None
    finish: Callable[[list[dict]], None] | None = None


def times_ar(point: dict) -> str:
    """A point's speed-up over ``ar`` for a progress line: the figure, or that it is withheld (``doubt``)."""
    return "× ar withheld (see the table)" if point.get("doubt") else f"{point['speedup_vs_ar']:.2f}× ar"


def ratio_cells(points, label: Callable[[dict], str]) -> tuple[list[str], list[str]]:
    """Each point's "× ar" cell (the figure, or "withheld (k)") and the numbered notes saying why (``doubt``), each
    note naming its point (``label``)."""
    cells, notes = [], []
    for p in points:
        if p.get("doubt"):
            notes.append(f"{len(notes) + 1}. {label(p)}: {p['doubt']}.")
            cells.append(f"withheld ({len(notes)})")
        else:
            cells.append(f"{p['speedup_vs_ar']:.2f}")
    return cells, (["", "Withheld, not printed as facts (a fair figure needs a quiet machine):", "", *notes] if notes else [])
