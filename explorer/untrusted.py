"""Reading JSON that strangers upload (a trace, a benchmark report) without trusting any of it.

``parse`` reads the text under a size cap and turns the parser's own failures (thousands of nested
levels exhaust its stack) into refusals; ``Kind`` and its kin say what each value must be (``whole``,
``number``, ``text``, ``ListOf``, ``Record``, ...) and refuse anything else; ``check_plain`` bounds the
free-form parts (plain JSON only, finite numbers, bounded size and depth). Between them nothing nested
deeper than ``MAX_JSON_DEPTH`` is accepted. Every refusal is a ``Refused`` whose message is one line
naming where the value sits (``rounds[3].q_drafted[2]``), what it must be, and the value cut short.
Nothing here recurses over the user's data: how deep it nests is the user's choice.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Callable

from .limits import MAX_JSON_DEPTH, clip

LARGEST = sys.float_info.max  # numbers beyond it (1e999 parses as inf; huge ints) are not finite
_SURROGATE = re.compile("[\ud800-\udfff]")  # a lone surrogate (valid JSON "\ud800") cannot be encoded for the page


class Refused(ValueError):
    """An uploaded value is not what it must be; ``str(err)`` is one line for the user."""


def parse(text: Any, max_bytes: int) -> Any:
    """The JSON value of ``text`` (str or bytes), refused past ``max_bytes`` or when it does not parse."""
    if not isinstance(text, (str, bytes, bytearray)):
        raise Refused("expected the text of a JSON file")
    size = len(text.encode("utf-8", "surrogatepass")) if isinstance(text, str) else len(text)
    if size > max_bytes:
        raise Refused(f"the file has {_megabytes(size)}; at most {_megabytes(max_bytes)} are allowed")
    try:
        return json.loads(text)
    except RecursionError:  # the parser recurses once per level: thousands of levels exhaust Python's stack
        raise Refused(f"the JSON nests deeper than {MAX_JSON_DEPTH} levels") from None
    except UnicodeDecodeError:
        raise Refused("the file is not UTF-8 text") from None
    except json.JSONDecodeError as err:
        raise Refused(f"invalid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    except ValueError:  # Python refuses to convert integers of more than 4300 digits
        raise Refused("invalid JSON (a number too long to read)") from None


def shown(value: Any) -> str:
    """A user's value for a message: a container by its size (its repr could be huge or deep) unless it
    is a short flat list, anything else as a clipped repr (one line: repr escapes newlines)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)  # null, true, false: as the file writes them
    if isinstance(value, dict):
        return f"an object with {len(value)} field(s)"
    if isinstance(value, (list, tuple)):
        flat = len(value) <= 4 and not any(isinstance(v, (list, tuple, dict)) for v in value)
        return clip(list(value)) if flat else f"a list of {len(value)} item(s)"
    return clip(value[:100] if isinstance(value, str) else value)


# -- kinds of values ----------------------------------------------------------------------------------


class Kind:
    """What a value must be: ``ok(value)``, and ``words`` that say it in a refusal. A ``container``
    kind's refusal points at the part inside that is wrong."""

    container = False

    def __init__(self, words: str, ok: Callable[[Any], bool]):
        self.words, self.ok = words, ok

    def check(self, value: Any, path: str) -> Any:
        """``value`` when it is of this kind; ``Refused`` naming ``path`` otherwise."""
        if not self.ok(value):
            raise Refused(self.explain(value, path))
        return value

    def explain(self, value: Any, path: str) -> str:
        return f"{path} must be {self.words}, got {shown(value)}"


class ListOf(Kind):
    """A list (or tuple) of ``least`` (default 0) to ``most`` items of one kind."""

    container = True

    def __init__(self, item: Kind, most: int, words: str, least: int = 0):
        super().__init__(words, lambda v: isinstance(v, (list, tuple)) and least <= len(v) <= most
                         and all(map(item.ok, v)))
        self.item, self.most, self.least = item, most, least

    def explain(self, value: Any, path: str) -> str:
        if not isinstance(value, (list, tuple)) or not self.least <= len(value) <= self.most:
            return super().explain(value, path)
        i = next(i for i, v in enumerate(value) if not self.item.ok(v))
        if self.item.container:
            return self.item.explain(value[i], f"{path}[{i}]")
        return f"{path} must be {self.words}, but {path}[{i}] is {shown(value[i])}"


class MapOf(Kind):
    """An object of at most ``most`` entries, keys and values each of one kind."""

    container = True

    def __init__(self, key: Kind, value: Kind, most: int, words: str):
        super().__init__(words, lambda v: isinstance(v, dict) and len(v) <= most
                         and all(key.ok(k) and value.ok(x) for k, x in v.items()))
        self.key, self.value, self.most = key, value, most

    def explain(self, value: Any, path: str) -> str:
        if not isinstance(value, dict) or len(value) > self.most:
            return super().explain(value, path)
        k = next(k for k, x in value.items() if not (self.key.ok(k) and self.value.ok(x)))
        if not self.key.ok(k):
            return f"{path} has a key that is not {self.key.words}: {shown(k)}"
        return self.value.explain(value[k], f"{path}[{k!r}]")


class Record(Kind):
    """An object with typed fields: the ``required`` ones present, each known one of its kind, and
    (``strict``) no others."""

    container = True

    def __init__(self, fields: dict[str, Kind], required=(), strict: bool = True, words: str = "an object"):
        super().__init__(words, self._ok)
        self.fields, self.required, self.strict = fields, tuple(required), strict
        self.needed = frozenset(required)

    def _ok(self, value: Any) -> bool:
        fields = self.fields
        return (isinstance(value, dict) and value.keys() >= self.needed
                and (not self.strict or value.keys() <= fields.keys())
                and all(fields[k].ok(v) for k, v in value.items() if k in fields))

    def explain(self, value: Any, path: str) -> str:
        if not isinstance(value, dict):
            return super().explain(value, path)
        missing = next((k for k in self.required if k not in value), None)
        if missing is not None:
            return f"missing field {_join(path, missing)!r}"
        unknown = next((k for k in value if k not in self.fields), None) if self.strict else None
        if unknown is not None:
            return f"unknown field {clip(_join(path, str(unknown)))}"
        k = next(k for k, kind in self.fields.items() if k in value and not kind.ok(value[k]))
        return self.fields[k].explain(value[k], _join(path, k))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def whole(lowest: int, highest: int, words: str | None = None) -> Kind:
    """A whole number (not a bool, not 2.0) from ``lowest`` to ``highest``."""
    return Kind(words or f"a whole number from {lowest} to {highest}",
                lambda v: isinstance(v, int) and not isinstance(v, bool) and lowest <= v <= highest)


def number(lowest: float = -LARGEST, highest: float = LARGEST, words: str | None = None) -> Kind:
    """A finite number from ``lowest`` to ``highest`` (NaN fails every comparison, so it never passes)."""
    bounded = f"a number from {lowest:g} to {highest:g}" if (lowest, highest) != (-LARGEST, LARGEST) else ""
    return Kind(words or bounded or "a finite number", lambda v: _real(v) and lowest <= v <= highest)


def text(most: int, words: str | None = None) -> Kind:
    """A string of at most ``most`` characters that can be shown (no lone surrogate)."""
    return Kind(words or f"a string of at most {most} characters",
                lambda v: isinstance(v, str) and len(v) <= most and not _SURROGATE.search(v))


def one_of(values) -> Kind:
    allowed = frozenset(values)
    return Kind(f"one of {', '.join(values)}", lambda v: isinstance(v, str) and v in allowed)


class Maybe(Kind):
    """``kind`` or null; a refusal explains the value as ``kind`` would."""

    def __init__(self, kind: Kind):
        super().__init__(f"{kind.words} or null", lambda v: v is None or kind.ok(v))
        self.kind, self.container = kind, kind.container

    def explain(self, value: Any, path: str) -> str:
        return self.kind.explain(value, path)


BOOL = Kind("true or false", lambda v: isinstance(v, bool))
FINITE = number()
OBJECT = Kind("an object", lambda v: isinstance(v, dict))
LIST = Kind("a list", lambda v: isinstance(v, (list, tuple)))


# -- free-form parts ----------------------------------------------------------------------------------

KEY = Kind("a string of at most 64 printable characters",
           lambda k: isinstance(k, str) and len(k) <= 64 and k.isprintable())  # a path in a message stays one line


def check_plain(value: Any, path: str, most_values: int, most_depth: int, most_chars: int) -> None:
    """Refuse anything in ``value`` but plain JSON: printable string keys, finite numbers, strings of at
    most ``most_chars``, true/false/null, at most ``most_values`` values nested at most ``most_depth``
    levels (``value`` itself is level 1). Iterative: a deep value cannot exhaust the stack."""
    string = text(most_chars)
    stack = [(value, path, 1)]
    seen = 0
    while stack:
        v, where, depth = stack.pop()
        seen += 1
        if seen > most_values:
            raise Refused(f"{path} holds more than {most_values} values")
        if isinstance(v, (dict, list, tuple)) and depth > most_depth:
            raise Refused(f"{path} nests deeper than {most_depth} levels")
        if isinstance(v, dict):
            for k, x in v.items():
                if not KEY.ok(k):
                    raise Refused(f"{where} has a key that is not {KEY.words}: {shown(k)}")
                stack.append((x, f"{where}.{k}", depth + 1))
        elif isinstance(v, (list, tuple)):
            stack.extend((x, f"{where}[{i}]", depth + 1) for i, x in enumerate(v))
        elif not (v is None or isinstance(v, bool) or FINITE.ok(v) or string.ok(v)):
            raise Refused(f"{where} must be a string of at most {most_chars} characters, a finite number, "
                          f"true, false or null, got {shown(v)}")


def _megabytes(n: int) -> str:
    return f"{n / 2**20:.1f} MB"
