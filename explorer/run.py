"""A run as it is decoded: ``Decoding`` (iterate it for rounds; ``trace()`` at any time) and the run's
totals (``summarize``), the one place the summary's figures are defined."""

from __future__ import annotations

from typing import Iterator

from . import theory
from .models import LoadedModel
from .pace import PaceLog
from .trace import RoundTrace, RunTrace, Settings, Summary, alpha_hat


class Decoding:
    """A run in progress: iterate for rounds; ``trace()`` at any time for the run so far.

    Built from the method's ``request`` (target, prompt, and the record's ``round_tokens``: the ids a
    round names beyond the common fields, whose text the trace carries). The trace grows with the rounds:
    each round's output and token texts are added once, when it arrives, so a live page that asks for
    the trace every fraction of a second pays for the new rounds, not for the whole run again."""

    def __init__(self, request, method: str, draft_name: str | None, settings: Settings,
                 rounds: Iterator[tuple[RoundTrace, float] | None], draft_about: str | None = None):
        self.target: LoadedModel = request.target
        self.method = method
        self.draft_name = draft_name
        self.draft_about = draft_about
        self.settings = settings
        self.prompt_ids = tuple(request.prompt_ids)
        self.prompt = request.prompt
        self.rounds: list[RoundTrace] = []
        self._round_tokens = getattr(request, "round_tokens", None)
        self._record_s = 0.0
        self._source = rounds
        self._finished = False
        self._output: list[int] = []
        self._token_text: dict[int, str] = {}
        self._pace: PaceLog | None = None
        self._named(self.prompt_ids)

    def watch_pace(self) -> "Decoding":
        """Record the machine's pace (``explorer.pace``) at the start, between rounds and at the end, into the
        trace's ``pace_ms``: for a run whose speed will be compared with another's (the page's run and its plain
        decoding, ``run --vs-ar``). Off the timed path, and off by default (the audit's hundreds of two-token runs
        would pay 22 ms each). Returns the run, to chain."""
        self._pace = self._pace or PaceLog()
        return self
    def __iter__(self) -> Iterator[RoundTrace]:
        return (record for record in self.steps() if record is not None)

    def steps(self) -> Iterator[RoundTrace | None]:
        """The rounds as they are decoded, and None whenever the method finished a piece of work that is
        not a round yet (beam search between its steps). A consumer that stops between two items (Stop, a
        cancelled job, a page closed) stops the work there, so nothing runs on for long after nobody
        waits for it."""
        self._probe(now=True)
        for item in self._source:
            if item is None:
                yield None
                continue
            record, record_s = item
            self._add(record)
            self._record_s += record_s
            yield record
            self._probe()
        self._probe(now=True)
        self._finished = True

    def _probe(self, now: bool = False) -> None:
        if self._pace is not None:
            self._pace.take(now)

    def run(self) -> RunTrace:
        """Decode to the end and return the trace."""
        for _ in self:
            pass
        return self.trace()

    def _add(self, r: RoundTrace) -> None:
        self.rounds.append(r)
        self._output += r.emitted
        ids = list(r.emitted) + list(r.drafted) + [i for i, _ in (r.residual_top or ())]
        for rows in (r.draft_top, r.target_top):
            ids += [i for row in rows for i, _ in row]
        ids += [n["token"] for n in (r.tree or {}).get("nodes", ())]
        if self._round_tokens is not None:
            ids += self._round_tokens(r)
        self._named(ids)

    def _named(self, ids) -> None:
        new = {i for i in ids if i not in self._token_text}
        if new:
            self._token_text.update(self.target.token_texts(sorted(new)))

    def trace(self) -> RunTrace:
        """The run so far; ``summary.stop_reason`` is ``stopped`` when it has not finished."""
        rounds, output = tuple(self.rounds), tuple(self._output)
        if not self._finished:
            stop = "stopped"
        elif output and output[-1] in self.target.eos_token_ids:
            stop = "eos"
        else:
            stop = "max_new_tokens"
        return RunTrace(
            method=self.method, model=self.target.name, draft=self.draft_name, settings=self.settings,
            prompt_ids=self.prompt_ids, output_ids=output, text=self.target.decode(list(output)),
            rounds=rounds, summary=summarize(rounds, self._record_s, stop, self.settings.lossy), prompt=self.prompt,
            draft_about=self.draft_about,
            device=str(self.target.device), dtype=str(self.target.dtype).replace("torch.", ""),
            token_text=dict(self._token_text), pace_ms=tuple(self._pace.samples) if self._pace else (),
        )


def summarize(rounds: tuple[RoundTrace, ...], record_s: float, stop_reason: str, lossy: bool = False) -> Summary:
    """Run totals from the rounds (see ``Summary`` for the definitions). Theorem 3.8 predicts only the
    lossless speculative methods."""
    new_tokens = sum(len(r.emitted) for r in rounds)
    drafted = sum(len(r.drafted) for r in rounds)
    accepted = sum(r.n_accepted for r in rounds)
    target_forwards = sum(r.target_forwards for r in rounds)
    draft_forwards = sum(r.draft_forwards for r in rounds)
    draft_s = sum(r.timing.draft_s for r in rounds)
    verify_s = sum(r.timing.verify_s for r in rounds)
    other_s = sum(r.timing.other_s for r in rounds)
    wall_s = draft_s + verify_s + other_s + record_s
    drafting = [r for r in rounds if r.drafted]
    mean_gamma = sum(len(r.drafted) for r in drafting) / len(drafting) if drafting else 0.0
    alpha = alpha_hat(rounds)
    c = cost_ratio(rounds)
    predicted = eq14 = None
    if alpha is not None and c is not None and mean_gamma > 0 and not lossy:
        predicted = float(theory.speedup(min(alpha, 1.0), mean_gamma, c))
    v_d = accepted / drafted if drafted else None
    r_d = accepted / new_tokens if drafted and new_tokens else None
    if v_d is not None and r_d is not None and c is not None and not lossy:
        # with nothing accepted eq. 14 is 0/0; eq. 13's time is then drafted·T_d + L·T_t
        eq14 = float(theory.eesd_speedup(v_d, r_d, c)) if accepted else 1 / (1 + c * drafted / new_tokens)
        eq14 = eq14 if abs(eq14) < float("inf") else None  # nan (0/0) when nothing was accepted and c = 0
    return Summary(
        new_tokens=new_tokens, rounds=len(rounds), drafted=drafted, accepted=accepted,
        acceptance_rate=accepted / drafted if drafted else None, alpha_hat=alpha, mean_gamma=mean_gamma,
        tokens_per_target_forward=new_tokens / target_forwards if target_forwards else None,
        target_forwards=target_forwards, draft_forwards=draft_forwards, draft_s=draft_s, verify_s=verify_s,
        other_s=other_s, wall_s=wall_s, tokens_per_s=new_tokens / wall_s if wall_s > 0 else None,
        c_measured=c, predicted_speedup=predicted, record_s=record_s, stop_reason=stop_reason,
        v_d=v_d, r_d=r_d, hm=theory.harmonic_mean(v_d, r_d) if v_d is not None else None, eq14_speedup=eq14,
    )


def cost_ratio(rounds) -> float | None:
    """c = seconds per draft forward / seconds per target forward, over the rounds after the first (the
    first verification also runs the whole prompt, which would make the target look slow)."""
    later = [r for r in rounds[1:] if r.drafted and r.target_forwards]
    if not later:
        return None
    draft_forwards = sum(r.draft_forwards for r in later)
    per_target = sum(r.timing.verify_s for r in later) / sum(r.target_forwards for r in later)
    per_draft = sum(r.timing.draft_s for r in later) / draft_forwards if draft_forwards else 0.0
    return per_draft / per_target if per_target > 0 else None
