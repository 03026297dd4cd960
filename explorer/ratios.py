"""One honesty rule for every figure that is a ratio of times: a speed-up, T(n)/T(1), a part's share of a forward.

Two times measured at different moments on a shared machine (a public Space, a 2-core CPU where other sessions
decode) may describe two different machines: the page printed "measured ×21.21 plain decoding" (#42), the theory
lab "× ar 33.10 at 6.40 tokens/round", ``bench --quick`` "suffix ×2.99 at 1.48 tokens a target forward",
``profile`` "T(16)/T(1) = 0.11" and parts of a forward adding up to 277 % (#48). So before any such ratio is
printed as a fact it passes two checks, the same everywhere (Watch, the theory lab, Compare, ``bench``,
``profile``, ``run --vs-ar``):

- **the pace held**: the fixed test ``explorer.pace`` times while each side decodes took, typically (its median),
  no more than ``PACE_TOLERANCE`` times longer for one side than for the other (``pace_moved``); where it moved,
  the figure is withheld and the words say why;
- **the ratio is possible**: a lossless run emits only tokens a target pass verified, and a pass costs at least a
  plain step, so it cannot beat plain decoding by more than its tokens per target pass (``impossible_speedup``);
  a forward of n tokens costs at least one of 1 token and at most about n of them (``verify_ratio_doubt``); the
  parts of one forward add up to at most all of it (``shares_doubt``). An impossible figure is never printed.

A leaf: pure functions of numbers (the pace samples, the ratios), so the CLI, the reports and the plots share
them without torch or plotly; ``viz.trust`` applies them to traces.
"""

from __future__ import annotations

from .pace import PACE_TOLERANCE, pace_change, typical_pace

NOISE = 1.25  # timing noise a speed-up may carry past what is possible before it is called impossible
VERIFY_NOISE = 0.5  # tokens' worth of room above n for a forward of n tokens (n one-token forwards' cost)
FLOOR_NOISE = 0.9  # T(n)/T(1) may dip this far below 1 (medians of a few forwards) before it is called impossible
SHARE_NOISE = 1.05  # the parts of one forward may add up to this much of it (timers' rounding) before it is refused
FAIR = "the race (Compare tab) and `python -m explorer bench` measure fairly: their runs take turns, so any load " \
       "falls on all of them alike"


def pace_moved(*runs) -> float | None:
    """How many times apart the machine's pace was over ``runs`` (each a sequence of ``pace_ms`` samples) when it
    moved past ``PACE_TOLERANCE``; None when it held (or fewer than two runs have samples)."""
    change = pace_change(*runs)
    return change if change > PACE_TOLERANCE else None


def pace_words(ours, theirs, what: str = "this run", other: str = "plain decoding") -> str | None:
    """Why two sides timed at different moments cannot be compared, in a sentence; None when the pace held."""
    change = pace_moved(ours, theirs)
    if change is None:
        return None
    return (f"the machine was busy: a fixed test typically took {typical_pace(ours):.1f} ms while {what} ran and "
            f"{typical_pace(theirs):.1f} ms while {other} did ({change:.1f}× apart; other work shared the CPU)")


def speedup_bound(tokens_per_target_forward: float | None, lossy: bool | None) -> float | None:
    """The most a run can gain over plain decoding, where known: a lossless run's tokens per target pass (each pass
    costs at least a plain step); None for a lossy run (it may skip the target) or where the count is unknown."""
    if lossy is not False or not tokens_per_target_forward:
        return None
    return max(1.0, tokens_per_target_forward)


def impossible_speedup(ratio: float | None, tokens_per_target_forward: float | None, lossy: bool | None) -> str | None:
    """Why a measured speed-up over plain decoding cannot be true, in a sentence; None when it can (or is unknown)."""
    bound = speedup_bound(tokens_per_target_forward, lossy)
    if ratio is None or bound is None or ratio <= bound * NOISE:
        return None
    return (f"×{ratio:.2f} is more than a lossless run with {tokens_per_target_forward:.2f} tokens per target pass can "
            f"gain (at most ×{bound:.2f}: each pass costs at least a plain step), so the two were not timed alike")


def verify_ratio_doubt(ratio: float, tokens: float, floor: float = 1.0,
                       who: str = "the run and plain decoding") -> str | None:
    """Why a measured T(n)/T(1) (one forward of ``tokens`` tokens against one of 1 token) cannot be, in words; None
    when it can: a forward of more tokens costs at least one of a single token (``floor``: 1 for a ratio that is
    printed as it was measured), and at most about as many as it has tokens. ``who`` met different loads."""
    if ratio < floor:
        return (f"came out below one plain forward, which a verification of more tokens cannot cost: {who} met "
                "different loads (or timing noise)")
    if ratio > max(tokens, 1) + VERIFY_NOISE:
        return (f"came out above what {tokens:g} one-token forwards would cost, more than a batched verification "
                f"can: {who} met different loads")
    return None


def curve_doubts(seconds, floor: float = 1.0) -> dict[int, str]:
    """The n of a measured T(n) curve whose T(n)/T(1) cannot be, with why (``verify_ratio_doubt``); ``seconds`` is
    T(n) by n, a mapping or a sequence for n = 1, 2, …. Empty when every ratio is possible. ``floor``: a curve
    that is printed smoothed (``engine.costs``: a running maximum, so a dip of noise never shows) checks its raw
    medians with ``FLOOR_NOISE``: a dip further than that means T(1) itself was slowed, and every ratio with it."""
    by_n = dict(seconds) if isinstance(seconds, dict) else {n: t for n, t in enumerate(seconds, 1)}
    first = by_n.get(1)
    if not first or first <= 0:
        return {}
    return {n: why for n, t in by_n.items() if n > 1 and (why := verify_ratio_doubt(t / first, n, floor, "the forwards")) is not None}


def curve_words(doubts: dict[int, str], ratios=None) -> str:
    """A measured T(n) curve's doubts in a sentence: which n, and why (``curve_doubts``)."""
    shown = ", ".join(f"T({n})/T(1) = {ratios[n - 1]:.2f}" if ratios else f"T({n})" for n in sorted(doubts)[:4])
    more = f" and {len(doubts) - 4} more" if len(doubts) > 4 else ""
    below = any("below" in why for why in doubts.values())
    return (f"{shown}{more} cannot be: a forward of more tokens costs at least one of a single token"
            + ("" if below else " and at most about as many as it has tokens")
            + " (another process slowed some of the forwards); rerun on a quiet machine")


def shares_doubt(total_share: float) -> str | None:
    """Why parts of one forward whose shares add up to ``total_share`` (1 = all of it) cannot be shown; None when
    they can."""
    if total_share <= SHARE_NOISE:
        return None
    return (f"the parts' own timers add up to {total_share:.0%} of the forward they are parts of, which no split can: "
            "their clocks and the wall clock met different loads (another process on the CPU); rerun on a quiet machine")
