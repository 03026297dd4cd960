"""A method's options, declared once: ``option`` gives a dataclass field its default and everything a person or a
form needs (range, choices, help, the paper's symbol), and ``Options`` checks every field against it on creation, so
the API's keywords, the CLI's flags, the page's controls and a loaded trace's settings are refused alike, in one line.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ..errors import ExplorerError
from ..limits import MAX_SPEC_CHARS, clip


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
