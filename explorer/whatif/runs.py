"""The explorer's own runs as drafters: a trace (``from_trace``), a benchmark report's rows (``from_report``), each
with its measured c; and T(n)/T(1) measured on this machine (``measure_verify_cost``: the one function that loads a
model, and torch with it, when called)."""

from __future__ import annotations

from .. import machine
from ..errors import ExplorerError
from ..limits import MAX_GAMMA, clip
from .counts import MAX_DRAFTERS, MAX_LABEL_CHARS
from .model import Acceptance, check_draft_cost, check_verify_cost


def measure_verify_cost(model: str, positions: int, progress=None) -> tuple[tuple[float, ...], str]:
    """T(n)/T(1) for n = 1 … positions + 1, measured on this machine with ``model`` (the explorer's own
    measurement, ``engine.costs``), and where it was measured in words."""
    from ..api import load_cached
    from ..engine.costs import verify_cost_curve

    if progress:
        progress(f"loading {model} to measure T(n) for n = 1…{positions + 1} on this machine")
    target = load_cached(model, None, None)
    if progress:
        progress(f"measuring T(n), n = 1…{positions + 1} (6 passes over the sizes)")
    curve = verify_cost_curve(target, max_tokens=positions + 1)
    where = f"model '{model}' on {target.device} ({str(target.dtype).replace('torch.', '')}; {machine.words()})"
    return tuple(t / curve[0] for t in curve), where


def from_trace(trace, name: str | None = None) -> Acceptance:
    """A run of this explorer: accepted ÷ tested drafts at each position (a draft after a rejection is
    never tested), chained into shares; with a controller that varies γ the shares are those of drafts that
    got that far, as if every round had drafted K. Its own c is the run's measured draft cost."""
    from ..trace import acceptance_by_position

    rounds = [r for r in trace.rounds if r.drafted]
    tested, accepted = acceptance_by_position(rounds)
    if not rounds or not any(tested):
        raise ExplorerError(f"the run ({trace.method}) drafted nothing: there is no acceptance to analyse")
    label = name or f"explorer · {trace.method}" + (f" {trace.draft}" if trace.draft else "")
    return Acceptance(label, "explorer", "an explorer run", _chain([a / t if t else 0.0 for a, t in zip(accepted, tested)]),
                      True, float(len(rounds)), float(sum(len(r.drafted) for r in rounds)),
                      float(sum(r.n_accepted for r in rounds)), draft_cost=trace.summary.c_measured)


def from_report(report: dict) -> list[Acceptance]:
    """Each drafting system of an explorer benchmark report (its accepted ÷ tested rates by position,
    its measured c, and the report's measured T(n)/T(1))."""
    ratios = (report.get("meta") or {}).get("verify_cost_ratio")
    # a benchmark measures K + 1 = 65 sizes at most; the rest of a longer curve is never read
    curve = check_verify_cost(ratios[:MAX_GAMMA + 1], "the report's verify_cost_ratio") if ratios else None
    drafters = []
    for row in report["rows"][:MAX_DRAFTERS]:
        rates = row.get("acceptance_by_position")
        if not rates:
            continue
        system = row["system"][:MAX_LABEL_CHARS]
        try:
            cost = check_draft_cost(row.get("c"))
        except ExplorerError as err:
            raise ExplorerError(f"the report's row {clip(system, 40)}: {err}") from None
        drafters.append(Acceptance(f"explorer · {system}", "explorer", "an explorer benchmark",
                                   _chain([r or 0.0 for r in rates]), True, draft_cost=cost, verify_cost=curve))
    if not drafters:
        raise ExplorerError("the benchmark report has no system that drafts (no acceptance_by_position)")
    return drafters


def _chain(conditional: list[float]) -> tuple[float, ...]:
    """Shares a_i = r_1 · … · r_i from conditional rates."""
    share, running = [], 1.0
    for rate in conditional:
        running *= min(max(rate, 0.0), 1.0)
        share.append(running)
    return tuple(share)
