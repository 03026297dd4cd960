"""A race: one prompt through plain decoding (``ar``) and up to three other systems, round by round.

The lanes share the machine by taking turns: the next round always goes to the unfinished lane whose own
clock (the sum of its rounds' measured seconds) is furthest behind. So at any moment every lane has run
about as long as the others, and what the page shows is what each would have done alone in that time —
on 2 cores, lanes decoding at once would slow each other and the race would measure the contention.
A finished race is exported as a benchmark report (``race_report``), which the Compare view reads.

Taking turns evens out load that comes and goes, not load that falls on one lane's turns more than another's
(the same race gave ``quantized`` ×1.48 and ×4.90 five minutes apart on a busy machine, #48). So every lane also
records the machine's pace between its rounds (``explorer.pace``), and a lane's ratio to plain decoding obeys the
rule of every ratio of times (``explorer.ratios``, through ``reports.row_doubt``): withheld where its pace and
plain decoding's moved apart, never printed where a lossless lane would beat plain decoding by more than its
tokens per target pass allow. A lossy lane (BiLD, lenience, the 4-bit copy alone) shows how much of plain
decoding's text it kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from . import methods
from .api import load_cached, stream
from .engine import fast
from .bench import System, decode_keywords, parse_system, position_rates
from .errors import ExplorerError
from .limits import MAX_SPEC_CHARS, clip
from .quality import first_divergence, token_agreement
from .run import Decoding

MAX_LANES = 3  # besides plain decoding
# the lanes a race starts with: the three fastest lossless methods on new text on this project's CPU (the
# target's own weights in 4 bits, SuffixDecoding's corpora, the prompt's own text; docs/measurements.md)
DEFAULT_LANES = ("quantized", "suffix", "speculative:prompt-lookup:3")
WARM_UP_TOKENS = 4


# lanes the menu offers beyond each method's defaults: the 4-bit copy alone (lossy: what keeping the text costs,
# beside ``quantized``) and two more speculative drafts
EXTRA_LANES = ("quantized:alone", "speculative:early-exit:8", "speculative:early-exit:4/cost-aware")


def race_systems() -> list[str]:
    """The lanes the page offers: every method's run with its defaults (as its record names it; plain
    decoding is the race's own first lane), then ``EXTRA_LANES``."""
    names = [m.default_system() for m in methods.discover().values() if m.name != "ar"]
    return [n for n in names if n] + [n for n in EXTRA_LANES if n not in names]


@dataclass
class Lane:
    """One system in the race: its decode, its own clock (seconds of its rounds) and where it finished."""

    system: System
    decoding: Decoding
    clock: float = 0.0
    done: bool = False
    place: int | None = None
    _rounds: Iterator = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return "ar (plain decoding)" if self.system.method == "ar" else self.system.name

    def step(self) -> bool:
        """Decode one round; False (and ``done``) when the lane has finished."""
        if self._rounds is None:
            self._rounds = iter(self.decoding)
        try:
            r = next(self._rounds)
        except StopIteration:
            self.done = True
            return False
        self.clock += r.timing.total_s
        return True


@dataclass(frozen=True)
class LaneView:
    """What the page draws of a lane: its tokens (text, how each came to be) and its counts so far."""

    label: str
    tokens: tuple[tuple[str, str], ...]  # (text piece, accepted | corrected | bonus | target | copy)
    clock: float
    done: bool
    place: int | None
    drafted: int
    accepted: int
    lossy: bool = False  # its text may differ from the target's (BiLD, lenience, the 4-bit copy alone)
    copy_alone: bool = False  # the target's low-bit copy decoding by itself: its tokens are the copy's
    pace_ms: tuple[float, ...] = ()  # the machine's pace between its rounds (``explorer.pace``)
    per_pass: float | None = None  # tokens per target forward (what bounds a lossless lane's speed-up)
    agreement: float | None = None  # greedy: the share of plain decoding's tokens so far it matches, position by position
    differs_at: int | None = None  # greedy: the first token (0-based) where it parts from plain decoding so far


def snapshot(lanes: list[Lane]) -> list[LaneView]:
    """Every lane as the page shows it now (token texts from the lane's own tokenizer); a greedy lane that may
    leave the target's text (lossy) measured against plain decoding's tokens so far (the first lane)."""
    views = []
    reference = [t for r in lanes[0].decoding.rounds for t in r.emitted] if lanes else []
    for lane in lanes:
        decoding = lane.decoding
        rounds = decoding.rounds
        ids = [t for r in rounds for t in r.emitted]
        alone = copy_alone(decoding.method, decoding.settings)
        kinds = [("copy" if alone and k == "target" else k) for r in rounds for k in r.emitted_kind]
        texts = decoding.target.token_texts(ids)
        forwards = sum(r.target_forwards for r in rounds)
        agreement = differs = None
        if decoding.settings.lossy and decoding.settings.temperature == 0 and lane is not lanes[0]:
            common = min(len(ids), len(reference))
            if common:
                agreement = token_agreement(ids[:common], reference[:common])
                differs = first_divergence(ids[:common], reference[:common])
        views.append(LaneView(lane.label, tuple((texts[t], k) for t, k in zip(ids, kinds)), lane.clock, lane.done,
                              lane.place, sum(len(r.drafted) for r in rounds), sum(r.n_accepted for r in rounds),
                              lossy=bool(decoding.settings.lossy), copy_alone=alone, pace_ms=decoding.trace().pace_ms,
                              per_pass=len(ids) / forwards if forwards and not alone else None, agreement=agreement,
                              differs_at=differs))
    return views


def copy_alone(method: str, settings) -> bool:
    """Whether a run is the target's low-bit copy decoding by itself (``quantized``, role alone)."""
    return method == "quantized" and (settings.options or {}).get("role") == "alone"


def parse_lanes(systems: list[str]) -> list[System]:
    """The chosen systems (blank and "none" entries skipped, duplicates once), ``ar`` first."""
    chosen: list[System] = []
    for name in systems:
        name = (name or "").strip()
        if not name or name == "none" or name == "ar" or name in [s.name for s in chosen]:
            continue
        if len(name) > MAX_SPEC_CHARS:  # a page's typed text: never read further (a 4 MB γ is no number)
            raise ExplorerError(f"a race system has {len(name):,} characters (at most {MAX_SPEC_CHARS}): {clip(name, 40)}")
        system = _race_system(name)
        chosen.append(system)
    if len(chosen) > MAX_LANES:
        raise ExplorerError(f"a race takes at most {MAX_LANES} systems besides plain decoding")
    return [parse_system("ar", 0, "fixed")] + chosen


def _race_system(name: str) -> System:
    """A system as the benchmark names it (``bild:<draft>`` is BiLD with its default thresholds; lossy)."""
    system = parse_system(name, 4, "fixed")
    if system.method.startswith("hf-"):
        raise ExplorerError(f"{name!r} is Hugging Face's own decoding: the race runs the explorer's systems")
    return system


def start(model, prompt: str | None, systems: list[str], *, prompt_ids: list[int] | None = None,
          temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, max_new_tokens: int = 64, seed: int = 0,
          chat: bool = True, dtype: str | None = None, device: str | None = None, session: str = "",
          plain: bool = True) -> list[Lane]:
    """Lanes ready to race: every decode validated and started before the first round, and every system run
    once for a few tokens first (untimed), so that no lane pays for loading its draft or a first call's
    allocations inside the race. ``dtype``: the target's (``None``: float32 on the CPU); ``device``: ``None``
    for the engine's default; ``session``: whose earlier outputs a lane that learns from them may use (the
    warm-ups neither use nor join any: ``session=None``); ``plain``: whether plain decoding runs as the first lane
    (the page's comparison after a run leaves it out when it has plain decoding at this pace already). Every lane
    records the machine's pace as it decodes."""
    target = load_cached(model, device, dtype)
    lanes = []
    for system in parse_lanes(systems)[0 if plain else 1:]:
        stream(target, None if prompt_ids else prompt, prompt_ids=prompt_ids, max_new_tokens=WARM_UP_TOKENS,
               chat=chat, device=device, session=None, **decode_keywords(system)).run()
        decoding = stream(target, None if prompt_ids else prompt, prompt_ids=prompt_ids, temperature=temperature,
                          top_k=top_k, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed, chat=chat,
                          device=device, session=session, **decode_keywords(system)).watch_pace()
        prompt_ids = list(decoding.prompt_ids)  # every lane decodes the same tokens
        lanes.append(Lane(system, decoding))
    return lanes


def steps(lanes: list[Lane]) -> Iterator[list[Lane]]:
    """Race round by round: always step the unfinished lane furthest behind; yield the lanes after each."""
    finished = 0
    while True:
        running = [lane for lane in lanes if not lane.done]
        if not running:
            return
        lane = min(running, key=lambda x: x.clock)
        if not lane.step():
            finished += 1
            lane.place = finished
        yield lanes


def run(lanes: list[Lane]) -> list[Lane]:
    """Race to the end."""
    for _ in steps(lanes):
        pass
    return lanes


def race_report(lanes: list[Lane]) -> dict:
    """The race as a benchmark report (``bench``'s row fields; one prompt, one repeat) for Compare."""
    traces = [lane.decoding.trace() for lane in lanes]
    plain = traces[0]
    base = plain.summary.tokens_per_s
    rows = []
    for lane, trace in zip(lanes, traces):
        s = trace.summary
        if not s.tokens_per_s or not base:
            continue
        rows.append({
            "system": lane.system.name, "method": trace.method, "draft": trace.draft,
            "controller": trace.settings.controller if trace.draft else None,
            "tokens_per_s": s.tokens_per_s, "speedup_vs_ar": s.tokens_per_s / base,
            "acceptance_rate": s.acceptance_rate, "alpha_hat": s.alpha_hat,
            "acceptance_by_position": position_rates(trace.rounds),
            "tokens_per_target_forward": s.tokens_per_target_forward, "c": s.c_measured,
            "predicted_speedup": s.predicted_speedup,
            "identical_to_ar": (list(trace.output_ids) == list(plain.output_ids))
            if trace.settings.temperature == 0 else None,
            "agreement_with_ar": token_agreement(list(trace.output_ids), list(plain.output_ids))
            if trace.settings.temperature == 0 and list(trace.output_ids) != list(plain.output_ids) else None,
            # what the honesty rule reads (``reports.row_doubt``): the pace between its rounds, and whether it is lossy
            "lossy": bool(trace.settings.lossy), "pace_ms": list(trace.pace_ms),
        })
    st = plain.settings
    meta = {"source": "race", "model": plain.model, "device": plain.device, "dtype": plain.dtype, "prompts": 1,
            "repeats": 1, "max_new_tokens": st.max_new_tokens, "temperature": st.temperature}
    return {"rows": rows, "meta": meta | fast.speed_record(lanes[0].decoding.target.model)}
