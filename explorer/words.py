"""Counting words, written once: a page that says "every 2th of 15 rounds" or "1 prompts × 1 repeats" reads
as careless, and each place that built its own suffix or plural got one of them wrong (#42).

A leaf: imports nothing of the project."""

from __future__ import annotations


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, … 11th, 12th, 13th, … 21st, 72nd, 101st, 111th."""
    n = int(n)
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def plural(n: int, word: str, words: str | None = None) -> str:
    """``n`` and the word in the number it takes: "1 prompt", "3 prompts", "1 degree of freedom" (``words``: a
    plural that is not ``word`` + s)."""
    return f"{n} {word if n == 1 else words or word + 's'}"


def times(n: int) -> str:
    """How often: "once", "2 times", "1,024 times"."""
    return "once" if n == 1 else f"{n:,} times"


def duration(seconds: float) -> str:
    """A time a visitor reads at a glance: "40 s", "7 min 50 s", "2 h 5 min" (seconds dropped past 10 minutes)."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min" + (f" {seconds % 60} s" if seconds % 60 and seconds < 600 else "")
    return f"{seconds // 3600} h" + (f" {seconds % 3600 // 60} min" if seconds % 3600 >= 60 else "")
