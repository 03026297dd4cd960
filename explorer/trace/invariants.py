"""What must hold in every trace, whoever wrote it: the rounds add up to the output and the totals."""

from __future__ import annotations

from ..limits import clip
from .model import EMITTED_KINDS, EVENTS, RunTrace


def check_invariants(trace: RunTrace) -> list[str]:
    """What must hold in every trace; returns the violations (empty when sound)."""
    problems = []
    emitted = [t for r in trace.rounds for t in r.emitted]
    if tuple(emitted) != tuple(trace.output_ids):
        problems.append("the rounds' emitted tokens do not concatenate to output_ids")
    context = len(trace.prompt_ids)
    for i, r in enumerate(trace.rounds):
        where = f"round {i}"
        if r.index != i:
            problems.append(f"{where}: index {clip(r.index)}, expected {i} (rounds in order)")
        if r.event not in EVENTS:
            problems.append(f"{where}: unknown event {clip(r.event)}")
        if any(k not in EMITTED_KINDS for k in r.emitted_kind):
            problems.append(f"{where}: unknown emitted kind")
        if not 0 <= r.n_accepted <= len(r.drafted):
            problems.append(f"{where}: accepted {r.n_accepted} of {len(r.drafted)} drafted")
        if tuple(r.emitted[: r.n_accepted]) != tuple(r.drafted[: r.n_accepted]):
            problems.append(f"{where}: accepted tokens differ from the drafted ones")
        if r.emitted_kind[: r.n_accepted] != ("accepted",) * r.n_accepted or len(r.emitted) > r.n_accepted + 1 \
                or "accepted" in r.emitted_kind[r.n_accepted:]:
            problems.append(f"{where}: emitted must be the accepted drafts and at most one token of the target's")
        if r.rejected_at is not None and not 0 <= r.rejected_at < len(r.drafted):
            problems.append(f"{where}: rejected_at {r.rejected_at} is not a drafted position")
        if not (len(r.q_drafted) == len(r.p_drafted) == len(r.drafted)):
            problems.append(f"{where}: q_drafted / p_drafted do not match drafted")
        if not (len(r.emitted_kind) == len(r.p_emitted) == len(r.emitted)):
            problems.append(f"{where}: emitted_kind / p_emitted do not match emitted")
        if r.tree is not None and [r.tree["nodes"][i]["token"] for i in r.tree["accepted_path"]][: r.n_accepted] \
                != list(r.emitted[: r.n_accepted]):
            problems.append(f"{where}: the tree's accepted path differs from the emitted tokens")
        if r.context_len != context:
            problems.append(f"{where}: context_len {r.context_len}, expected {context}")
        context += len(r.emitted)
    s = trace.summary
    if s.new_tokens != len(trace.output_ids) or s.rounds != len(trace.rounds):
        problems.append("summary counts differ from the rounds")
    if s.drafted != sum(len(r.drafted) for r in trace.rounds):
        problems.append("summary.drafted differs from the rounds")
    if s.accepted != sum(r.n_accepted for r in trace.rounds):
        problems.append("summary.accepted differs from the rounds")
    if s.target_forwards != sum(r.target_forwards for r in trace.rounds):
        problems.append("summary.target_forwards differs from the rounds")
    problems += _rate_problems(s)
    return problems


RATE_ROUNDING = 1e-5  # relative: a writer that rounds its figures to six significant digits still passes


def _rate_problems(s) -> list[str]:
    """The summary's rate is its own counts over its own clock (``run.py``: tokens_per_s = new_tokens / wall_s, None
    when no time passed), so the page never prints a figure the file cannot have: a forged wall_s = 0 with
    tokens_per_s = 1e12 showed 1e12 tokens/s."""
    if s.tokens_per_s is not None and not s.wall_s > 0:
        return [f"summary.tokens_per_s is {clip(s.tokens_per_s)} while wall_s is {clip(s.wall_s)} s: no rate without time"]
    if s.new_tokens > 0 and not s.wall_s > 0:
        return [f"summary.wall_s is {clip(s.wall_s)} s for {s.new_tokens} new tokens: decoding takes time"]
    if s.tokens_per_s is None:
        return []
    rate = s.new_tokens / s.wall_s
    if abs(s.tokens_per_s - rate) > RATE_ROUNDING * max(rate, 1.0):
        return [f"summary.tokens_per_s is {clip(s.tokens_per_s)}, not new_tokens / wall_s = {s.new_tokens} / "
                f"{s.wall_s:.6g} s = {rate:.6g}"]
    return []
