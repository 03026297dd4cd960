"""What if: acceptance by draft position and the best γ, from a serving engine's own counters.

Production engines export the counts behind speculative decoding but not the decision they imply:

- vLLM (v1): the Prometheus counters ``vllm:spec_decode_num_drafts``, ``…_num_draft_tokens``,
  ``…_num_accepted_tokens`` and ``…_num_accepted_tokens_per_pos{position="i"}`` (i from 0) at ``/metrics``,
  and the log line "SpecDecoding metrics: Mean acceptance length: …, Per-position acceptance rate: …";
  vLLM v0's "Speculative metrics: … Number of speculative tokens: K, Number of accepted tokens: …" line;
- llama.cpp's server: ``timings`` in each response (``draft_n``, ``draft_n_accepted``, ``predicted_n``);
- SGLang: the gauge ``sglang:spec_accept_length`` (and ``sglang:spec_accept_rate``), or "accept len: …"
  in its decode log.

Each becomes an ``Acceptance``: the share a_i of drafts whose position i was accepted, i = 1 … K. Every
drafter here accepts a prefix (position i only if 1 … i − 1 were), so drafting γ ≤ K tokens with the same
drafter emits, per target forward,

    E(γ) = 1 + a_1 + … + a_γ                         (the bonus or correction token, plus the accepted)

and Leviathan et al.'s Theorem 3.8 with verification priced as measured gives the speed-up over plain
decoding

    S(γ) = E(γ) / (γ·c + T(γ+1)/T(1)),               S(0) = 1 (no speculation)

with c the draft's cost per token over a target forward. Under the paper's i.i.d. assumption
(Definition 3.1) a_i = α^i and E(γ) = (1 − α^(γ+1)) / (1 − α) (eq. 1); ``iid_alpha`` is the α that gives the
same mean acceptance length E(K), and the analysis shows both curves and how far they part. Sources that
export only a mean (llama.cpp, SGLang, vLLM v0) give no per-position figures: there the i.i.d. fit is all
there is, and the result says so.

Everything read here is untrusted (a stranger's upload on a public Space): sizes are bounded, every count
checked (finite, whole, not negative, consistent with the others), and refusals are ``ExplorerError``
lines. Numpy only, no torch.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from . import machine
from .errors import ExplorerError
from .limits import MAX_GAMMA, clip

MAX_METRICS_BYTES = 4 * 2**20  # a vLLM /metrics page is 50–300 KB; a day of log lines a few MB
# A line that is parsed: vLLM's longest (64 positions) is under 1 000 characters, a /metrics sample a few hundred.
# The Prometheus parser copies the rest of a line once per label (one 1 MB line took 5.7 s), so lines are bounded
# before it reads them; the log lines are read with string operations only (a regular expression over them
# backtracked: 2 000 spaces took 10 s with the GIL held, issue 40).
MAX_LINE_CHARS = 2048
MAX_DRAFTERS = 32  # engines/models told apart in one file
MAX_LABEL_CHARS = 80  # a label value as shown in a drafter's name
DEFAULT_DRAFT_COST = 0.05  # c assumed when neither the user nor the source gives one: a one-layer head on a 7B+ target
MAX_DRAFT_COST = 10.0
MAX_COUNT = 2**63  # counters past this are not counts of anything real
TOLERANCE = 0.5  # counters scraped at one instant agree exactly; half a token absorbs float formatting

# What each engine calls γ, for the advice
KNOB = {
    "vLLM": "num_speculative_tokens", "llama.cpp": "--draft-max", "SGLang": "--speculative-num-steps",
    "explorer": "γ (--gamma)",
}


@dataclass(frozen=True)
class Acceptance:
    """One drafter's acceptance by draft position, as read from one source.

    ``share[i - 1]`` is a_i, the share of drafts whose position i was accepted (non-increasing, since a
    draft is accepted as a prefix). ``observed`` is False where the source gives only a mean and the
    shares are the i.i.d. fit α^i. ``draft_cost`` and ``verify_cost`` (T(n)/T(1), n = 1, 2, …) are the
    source's own measurements where it has them (the explorer's runs and reports)."""

    name: str
    engine: str  # a key of KNOB
    source: str  # how it was read, in words
    share: tuple[float, ...]
    observed: bool
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    draft_cost: float | None = None
    verify_cost: tuple[float, ...] | None = None

    @property
    def positions(self) -> int:
        return len(self.share)

    @property
    def conditional(self) -> tuple[float | None, ...]:
        """a_i / a_(i−1): the rate at position i among drafts whose earlier positions were all accepted
        (None where no draft got that far)."""
        before = (1.0, *self.share[:-1])
        return tuple(a / b if b > 0 else None for a, b in zip(self.share, before))

    @property
    def mean_length(self) -> float:
        """Mean acceptance length E(K): tokens per target forward, the bonus token included (vLLM's
        convention: 1 + accepted / drafts)."""
        return 1.0 + sum(self.share)


# -- the analysis ---------------------------------------------------------------------------------


def expected_tokens(share, gamma: int) -> float:
    """E(γ) = 1 + a_1 + … + a_γ: tokens per target forward when γ tokens are drafted."""
    return 1.0 + float(sum(share[:gamma]))


def iid_alpha(mean_length: float, positions: int) -> float:
    """The α at which K = ``positions`` i.i.d. drafts give ``mean_length`` tokens per forward:
    1 + α + … + α^K = E, solved by bisection (the left side rises with α from 1 to K + 1)."""
    if positions < 1:
        return 0.0
    target = min(max(float(mean_length), 1.0), positions + 1.0)
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if sum(mid ** i for i in range(positions + 1)) < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def verify_ratio(curve: tuple[float, ...] | None, n: int) -> float:
    """T(n)/T(1) from a curve given for n = 1, 2, …: flat (1, as on an accelerator with spare
    parallelism) without one, extended linearly past its end."""
    if not curve:
        return 1.0
    if n <= len(curve):
        return float(curve[n - 1])
    slope = curve[-1] - curve[-2] if len(curve) > 1 else 0.0
    return float(curve[-1] + slope * (n - len(curve)))


def speedups(share, draft_cost: float, curve) -> list[float]:
    """S(γ) = E(γ) / (γ·c + T(γ+1)/T(1)) for γ = 0 … K (S(0) = 1 when T(1)/T(1) = 1)."""
    return [expected_tokens(share, g) / (g * draft_cost + verify_ratio(curve, g + 1)) for g in range(len(share) + 1)]


def best_gamma(values: list[float]) -> int:
    """The γ of the highest speed-up; the shortest draft among equals (it costs less memory and risk)."""
    return max(range(len(values)), key=lambda g: (round(values[g], 12), -g))


def parse_verify_cost(text: str | None) -> tuple[float, ...] | None:
    """``1,1.05,1.1`` → T(n)/T(1) for n = 1, 2, 3; None or empty → flat (``check_verify_cost``'s rules)."""
    if text is None or not str(text).strip():
        return None
    raw = str(text)
    if len(raw) > 2000:
        raise ExplorerError(f"the verify cost has {len(raw)} characters; give at most {MAX_GAMMA + 1} numbers")
    try:
        values = tuple(float(x) for x in raw.split(",") if x.strip())
    except ValueError:
        raise ExplorerError(f"the verify cost must be comma-separated numbers T(n)/T(1) for n = 1, 2, …, e.g. "
                            f"1,1.05,1.1; got {clip(raw, 60)}") from None
    return check_verify_cost(values)


def check_verify_cost(values, what: str = "the verify cost") -> tuple[float, ...]:
    """T(n)/T(1) for n = 1, 2, … as the speed-up may divide by it: 1 to K + 1 numbers from 0.5 to 100, the first
    1 (it is T(1)/T(1)), none falling (running more tokens never costs less). A falling or zero curve would price
    a longer draft at nothing: a report's ``[0]`` or ``[1, 0.5]`` divided by zero."""
    values = tuple(values)
    if not values or len(values) > MAX_GAMMA + 1:
        raise ExplorerError(f"{what} needs 1 to {MAX_GAMMA + 1} values, got {len(values)}")
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0.5 <= v <= 100
           for v in values):
        raise ExplorerError(f"{what}: each T(n)/T(1) must be a number from 0.5 to 100")
    if abs(values[0] - 1.0) > 1e-9:
        raise ExplorerError(f"{what} starts at n = 1, where T(1)/T(1) = 1; got {values[0]:g}")
    if any(b < a - 1e-9 for a, b in zip(values, values[1:])):
        raise ExplorerError(f"{what} may not fall with n: checking more tokens never costs less")
    return tuple(float(v) for v in values)


def check_draft_cost(value) -> float | None:
    """c from the user: None (each drafter's own, else the default) or a number from 0 to 10."""
    if value is None:
        return None
    try:
        c = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past a float's range
        raise ExplorerError(f"the draft cost c must be a number (a draft token's time over a target forward's), "
                            f"got {clip(value, 40)}") from None
    if not math.isfinite(c) or not 0 <= c <= MAX_DRAFT_COST:
        raise ExplorerError(f"the draft cost c must be from 0 to {MAX_DRAFT_COST:g} (× one target forward), got {c:g}")
    return c


def analyse(acc: Acceptance, draft_cost: float | None = None, curve: tuple[float, ...] | None = None) -> dict:
    """Everything the CLI, the page and ``--json`` say about one drafter (plain data)."""
    c = draft_cost if draft_cost is not None else (acc.draft_cost if acc.draft_cost is not None else DEFAULT_DRAFT_COST)
    c_from = "given" if draft_cost is not None else ("measured" if acc.draft_cost is not None else "assumed")
    curve = curve if curve is not None else acc.verify_cost
    alpha = iid_alpha(acc.mean_length, acc.positions)
    iid_share = tuple(alpha ** i for i in range(1, acc.positions + 1))
    values = speedups(acc.share, c, curve)
    iid_values = speedups(iid_share, c, curve)
    best, iid_best = best_gamma(values), best_gamma(iid_values)
    return {
        "name": acc.name, "engine": acc.engine, "source": acc.source, "per_position_observed": acc.observed,
        "drafts": acc.drafts, "draft_tokens": acc.draft_tokens, "accepted_tokens": acc.accepted_tokens,
        "positions": acc.positions,
        "acceptance_by_position": list(acc.share), "conditional_by_position": list(acc.conditional),
        "mean_acceptance_length": acc.mean_length, "iid_alpha": alpha, "iid_acceptance_by_position": list(iid_share),
        "iid_largest_gap": max((abs(a - b) for a, b in zip(acc.share, iid_share)), default=0.0),
        "expected_tokens_by_gamma": [expected_tokens(acc.share, g) for g in range(acc.positions + 1)],
        "speedup_by_gamma": values, "iid_speedup_by_gamma": iid_values,
        "best_gamma": best, "best_speedup": values[best], "iid_best_gamma": iid_best,
        "draft_cost": c, "draft_cost_from": c_from,
        "verify_cost": [verify_ratio(curve, n) for n in range(1, acc.positions + 2)], "verify_cost_flat": not curve,
    }


def advice(result: dict) -> str:
    """What to change, in plain words, from one ``analyse`` result."""
    k, best, c = result["positions"], result["best_gamma"], result["draft_cost"]
    share, values = result["acceptance_by_position"], result["speedup_by_gamma"]
    knob = KNOB.get(result["engine"], "the draft length")
    pricing = (f"a draft token costing c = {c:.3g} of a target forward ({result['draft_cost_from']}) and "
               + ("checking γ + 1 tokens costing one forward (flat, as on a GPU with room to spare)"
                  if result["verify_cost_flat"] else "checking γ + 1 tokens priced by the T(n)/T(1) curve"))
    if best == 0:
        return (f"No draft length pays at {pricing}: even position 1, accepted in {share[0]:.0%} of drafts, costs "
                f"more than it brings. Speculation slows this workload down; turn it off or use a cheaper draft "
                f"(n-gram or prompt lookup, c ≈ 0).")
    head = f"With {pricing}, the best draft length is γ = {best} (×{values[best]:.2f} over no speculation"
    if best < k:
        extra = (f"position {k} is accepted in only {share[best]:.0%} of drafts, too few to pay for its draft token "
                 "and the longer check" if best + 1 == k else
                 f"positions {best + 1}–{k} are accepted in at most {share[best]:.0%} of drafts, too few to pay for "
                 "their draft tokens and the longer check")
        return f"{head}; ×{values[k]:.2f} at γ = {k}, the longest draft in the data): {extra}. Set {knob} to {best}."
    tail = (f"{head}): every position drafted pays, the last ({k}) still accepted in {share[-1]:.0%} of drafts. "
            f"A longer draft may pay too; the data cannot say (no draft went past {k})")
    if result["iid_best_gamma"] < k or not result["per_position_observed"]:
        return tail + "."
    return tail + f"; under the i.i.d. fit (α = {result['iid_alpha']:.2f}) try {knob} = {k + 1}–{k + 2}."


def explain(result: dict) -> str:
    """The numbers of one result in plain words (no markup)."""
    share, cond = result["acceptance_by_position"], result["conditional_by_position"]
    shown = ", ".join(f"{a:.0%}" for a in share[:8]) + (", …" if len(share) > 8 else "")
    lines = []
    if result["per_position_observed"]:
        drafts = f" of {result['drafts']:,.0f} drafts" if result["drafts"] else ""
        lines.append(f"Accepted by position 1…{len(share)}{drafts}: {shown}; given the positions before it were "
                     "accepted: " + ", ".join("–" if r is None else f"{r:.0%}" for r in cond[:8])
                     + (", …" if len(cond) > 8 else "") + ".")
    else:
        lines.append(f"This source ({result['source']}) gives only a mean acceptance length, not acceptance by "
                     f"position: the shares "
                     f"below are the i.i.d. fit ({shown}). vLLM's per-position counters would show whether late "
                     "positions collapse.")
    gap = result["iid_largest_gap"]
    lines.append(f"Mean acceptance length {result['mean_acceptance_length']:.2f} tokens per target forward; one "
                 f"i.i.d. rate α = {result['iid_alpha']:.2f} gives the same length"
                 + (f" but misses position by position by up to {gap * 100:.0f} percentage points and would pick γ = "
                    f"{result['iid_best_gamma']} instead of {result['best_gamma']}."
                    if result["per_position_observed"] and result["iid_best_gamma"] != result["best_gamma"] else
                    f", within {gap * 100:.0f} percentage points at every position." if result["per_position_observed"] else "."))
    lines.append(advice(result))
    return "\n".join(lines)


def analyse_all(drafters: list[Acceptance], draft_cost=None, verify_cost: tuple[float, ...] | None = None) -> dict:
    """``--json``'s document: one result per drafter, and the prices used."""
    return {"drafters": [analyse(a, draft_cost, verify_cost) for a in drafters],
            "draft_cost": draft_cost, "verify_cost": list(verify_cost) if verify_cost else None}


# -- reading an engine's numbers ---------------------------------------------------------------------


def _count(value, what: str) -> float:
    """A counter's value: finite, not negative, whole (counters print as 123.0). An integer is bounded before
    any float arithmetic: JSON gives a 4 000-digit one exactly, and turning it into a float overflows."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExplorerError(f"{what} must be a number, got {clip(value, 40)}")
    if isinstance(value, int) and not 0 <= value <= MAX_COUNT:
        shown = f"a number of {len(str(abs(value)))} digits" if abs(value) > 10**15 else str(value)
        raise ExplorerError(f"{what} must be a count from 0 to 2^63, got {shown}")
    if not math.isfinite(value) or value < 0 or value > MAX_COUNT:
        raise ExplorerError(f"{what} must be a finite count of at least 0, got {value:g}")
    if abs(value - round(value)) > 1e-6:
        raise ExplorerError(f"{what} must be a whole count, got {value:g}")
    return float(round(value))


def from_counts(name: str, engine: str, source: str, drafts, draft_tokens, accepted_tokens, per_position) -> Acceptance:
    """vLLM's counters: ``per_position[i]`` drafts had position i + 1 accepted. Checked for what the
    counters must satisfy when every draft is accepted as a prefix: counts fall with the position, no
    position beats the drafts, they add up to the accepted tokens, and accepted ≤ drafted ≤ drafts × K."""
    drafts = _count(drafts, f"{name}: the number of drafts")
    per_position = [_count(v, f"{name}: accepted at position {i + 1}") for i, v in enumerate(per_position)]
    accepted = _count(accepted_tokens, f"{name}: accepted tokens") if accepted_tokens is not None else sum(per_position)
    drafted = _count(draft_tokens, f"{name}: draft tokens") if draft_tokens is not None else None
    if drafts == 0:
        raise ExplorerError(f"{name}: no drafts counted yet: send some requests with speculative decoding on, then "
                            "read the metrics again")
    if not per_position:
        raise ExplorerError(f"{name}: no per-position counts (vllm:spec_decode_num_accepted_tokens_per_pos)")
    if len(per_position) > MAX_GAMMA:
        raise ExplorerError(f"{name}: {len(per_position)} draft positions; at most {MAX_GAMMA} are read")
    if per_position[0] > drafts + TOLERANCE:
        raise ExplorerError(f"{name}: inconsistent counts: position 1 accepted {per_position[0]:.0f} times in "
                            f"{drafts:.0f} drafts")
    for i in range(1, len(per_position)):
        if per_position[i] > per_position[i - 1] + TOLERANCE:
            raise ExplorerError(f"{name}: inconsistent counts: position {i + 1} accepted more often "
                                f"({per_position[i]:.0f}) than position {i} ({per_position[i - 1]:.0f}), but a "
                                "draft is accepted as a prefix")
    if abs(sum(per_position) - accepted) > TOLERANCE:
        raise ExplorerError(f"{name}: inconsistent counts: the positions add up to {sum(per_position):.0f} accepted "
                            f"tokens, the total says {accepted:.0f} (were the counters read at different times?)")
    if drafted is not None and not accepted <= drafted + TOLERANCE <= drafts * len(per_position) + 2 * TOLERANCE:
        raise ExplorerError(f"{name}: inconsistent counts: {accepted:.0f} accepted of {drafted:.0f} drafted tokens "
                            f"in {drafts:.0f} drafts of at most {len(per_position)}")
    return Acceptance(name, engine, source, tuple(a / drafts for a in per_position), True, drafts, drafted, accepted)


def from_mean(name: str, engine: str, source: str, mean_length: float, positions: int, drafts=None,
              draft_tokens=None, accepted_tokens=None) -> Acceptance:
    """A source with only a mean acceptance length E over drafts of K = ``positions``: the i.i.d. fit."""
    if not isinstance(positions, int) or not 1 <= positions <= MAX_GAMMA:
        raise ExplorerError(f"{name}: the draft length must be a whole number from 1 to {MAX_GAMMA}, got "
                            f"{clip(positions, 20)}")
    if not math.isfinite(mean_length) or not 1 <= mean_length <= positions + 1 + 1e-6:
        raise ExplorerError(f"{name}: a mean acceptance length of {mean_length:g} is impossible with drafts of "
                            f"{positions} tokens (it lies from 1 to {positions + 1})")
    alpha = iid_alpha(mean_length, positions)
    return Acceptance(name, engine, source, tuple(alpha ** i for i in range(1, positions + 1)), False, drafts,
                      draft_tokens, accepted_tokens)


def read(text: str | bytes, gamma: int | None = None, name: str = "") -> list[Acceptance]:
    """Every drafter in a file: Prometheus text (vLLM, SGLang), vLLM or SGLang log lines, or llama.cpp
    timings JSON; the explorer's own traces and benchmark reports too. ``gamma`` gives the draft length
    that a source without per-position counts does not say (llama.cpp's --draft-max, SGLang's steps)."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) > MAX_METRICS_BYTES:
            raise ExplorerError(_too_big(len(text)))
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise ExplorerError("the file is not UTF-8 text: give a /metrics page, a log excerpt or a JSON file") from None
    if not isinstance(text, str):
        raise ExplorerError("expected the text of a metrics page, a log excerpt or a JSON file")
    if len(text) > MAX_METRICS_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_METRICS_BYTES:
        raise ExplorerError(_too_big(len(text.encode("utf-8", "surrogatepass"))))
    if gamma is not None and (isinstance(gamma, bool) or not isinstance(gamma, int) or not 1 <= gamma <= MAX_GAMMA):
        raise ExplorerError(f"the draft length γ must be a whole number from 1 to {MAX_GAMMA}, got {clip(gamma, 20)}")
    stripped = text.strip()
    if not stripped:
        raise ExplorerError("the file is empty: paste a /metrics page, a log line or llama.cpp timings")
    logged = any(marker in text for marker in ("SpecDecoding metrics:", "Speculative metrics:", "accept len:"))
    if stripped[0] in "[{" and not (logged and not _is_json(stripped)):  # log lines may open with "[time]"
        return _from_json(stripped, gamma, name)
    if "SpecDecoding metrics:" in text:
        return [_vllm_log(text, name)]
    if "Speculative metrics:" in text:
        return [_vllm_v0_log(text, name)]
    if "accept len:" in text:
        return [_sglang_log(text, gamma, name)]
    return _prometheus(text, gamma)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _too_big(size: int) -> str:
    return (f"the file has {size / 2**20:.1f} MB; at most {MAX_METRICS_BYTES // 2**20} MB are read (one /metrics "
            "page or a log excerpt is far less)")


def _label_name(engine: str, labels: dict) -> str:
    """A drafter's name from its labels, each value clipped (labels are the stranger's text)."""
    parts = [f"{k}={v[:MAX_LABEL_CHARS]}" for k, v in sorted(labels.items())[:6]]
    return f"{engine}" + (f" · {', '.join(parts)}" if parts else "")


VLLM = "vllm:spec_decode_"
VLLM_COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "num_accepted_tokens_per_pos")


def _prometheus(text: str, gamma: int | None) -> list[Acceptance]:
    """vLLM's spec-decode counters and SGLang's accept-length gauge from Prometheus exposition text, one
    drafter per label set (model_name, engine, …; the position label aside)."""
    from prometheus_client.parser import text_string_to_metric_families

    vllm: dict[tuple, dict] = {}
    sglang: dict[tuple, dict] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) > MAX_LINE_CHARS:
            raise ExplorerError(f"line {n} has {len(line):,} characters; a metrics line is a few hundred (at most "
                                f"{MAX_LINE_CHARS:,} are read): is this a /metrics page?")
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                name = sample.name
                if name.endswith("_created"):
                    continue  # the time a counter was created, not a count
                base = name.removesuffix("_total")
                labels = dict(sample.labels)
                if base.startswith(VLLM) and base[len(VLLM):] in VLLM_COUNTERS:
                    position = labels.pop("position", None)
                    entry = vllm.setdefault(tuple(sorted(labels.items())), {"per_position": {}})
                    if base.endswith("_per_pos"):
                        if position is None or not position.isdigit() or int(position) >= MAX_GAMMA:
                            raise ExplorerError(f"a per-position counter has position {clip(position, 20)}; "
                                                f"expected 0 to {MAX_GAMMA - 1}")
                        entry["per_position"][int(position)] = sample.value
                    else:
                        entry[base[len(VLLM):]] = sample.value
                elif base in ("sglang:spec_accept_length", "sglang:spec_accept_rate"):
                    sglang.setdefault(tuple(sorted(labels.items())), {})[base.split(":spec_")[1]] = sample.value
                if len(vllm) + len(sglang) > MAX_DRAFTERS:
                    raise ExplorerError(f"more than {MAX_DRAFTERS} engines or models in one file: keep the ones to "
                                        "compare")
    except ExplorerError:
        raise
    except Exception:  # the parser's own error names internals; the user needs what the file should be
        raise ExplorerError("not Prometheus metrics text (a line is not `name{labels} value`), nor a vLLM or SGLang "
                            "log line, nor llama.cpp timings JSON") from None
    drafters = []
    for labels, entry in vllm.items():
        name = _label_name("vLLM", dict(labels))
        per = entry["per_position"]
        if sorted(per) != list(range(len(per))):
            raise ExplorerError(f"{name}: per-position counters for positions {sorted(per)[:8]}: some are missing")
        drafts = entry.get("num_drafts")
        if drafts is None and gamma is not None and entry.get("num_draft_tokens") is not None:
            # vLLM v0 counts no drafts: every draft has γ tokens
            drafts = _count(entry["num_draft_tokens"], f"{name}: draft tokens") / gamma
        if drafts is None:
            raise ExplorerError(f"{name}: no vllm:spec_decode_num_drafts counter (vLLM v0?): give the draft length γ "
                                "(num_speculative_tokens) to count drafts from the draft tokens")
        if not per:
            drafts = _count(drafts, f"{name}: the number of drafts")
            if drafts == 0:
                raise ExplorerError(f"{name}: no drafts counted yet: send some requests with speculative decoding on")
            mean = 1 + _count(entry.get("num_accepted_tokens", 0.0), f"{name}: accepted tokens") / drafts
            if gamma is None:
                raise ExplorerError(f"{name}: no per-position counters: give the draft length γ (num_speculative_tokens)")
            drafters.append(from_mean(name, "vLLM", "vLLM /metrics (totals only)", mean, gamma, drafts,
                                      entry.get("num_draft_tokens"), entry.get("num_accepted_tokens")))
            continue
        drafters.append(from_counts(name, "vLLM", "vLLM /metrics", drafts, entry.get("num_draft_tokens"),
                                    entry.get("num_accepted_tokens"), [per[i] for i in range(len(per))]))
    for labels, entry in sglang.items():
        name = _label_name("SGLang", dict(labels))
        if "accept_length" not in entry:
            continue
        drafters.append(_sglang(name, "SGLang /metrics", entry["accept_length"], entry.get("accept_rate"), gamma))
    if not drafters:
        raise ExplorerError("no speculative-decoding counters in this file (looked for vllm:spec_decode_num_drafts, "
                            "…_num_accepted_tokens_per_pos and sglang:spec_accept_length): is speculative decoding on?")
    return drafters


def _sglang(name: str, source: str, length, rate, gamma: int | None) -> Acceptance:
    """SGLang's mean accept length L (tokens per verification, the bonus included). Its draft length is
    γ when given, else (L − 1) / accept rate when the rate is there too. L is at most K + 1 ≤ 65 and the
    implied draft length at most K, checked before dividing (1e300 over 1e-300 overflowed)."""
    real = _real(length)
    if real is None or not 1 <= real <= MAX_GAMMA + 1:
        raise ExplorerError(f"{name}: an accept length of {_shown(length)} is impossible (it lies from 1 to "
                            f"{MAX_GAMMA + 1}: the drafts accepted plus the target's own token)")
    rate = _real(rate)
    if gamma is None and rate is not None and 0 < rate <= 1:
        steps = (real - 1) / rate
        if steps > MAX_GAMMA + 0.5:
            raise ExplorerError(f"{name}: an accept length of {real:g} at an accept rate of {rate:g} means drafts of "
                                f"more than {MAX_GAMMA} tokens: give the draft length γ (--speculative-num-steps)")
        gamma = max(1, round(steps))
    if gamma is None:
        raise ExplorerError(f"{name}: SGLang gives only the mean accept length ({real:.2f}): give the draft length "
                            "γ (--speculative-num-steps) to fit it")
    return from_mean(name, "SGLang", source, real, gamma)


def _real(value) -> float | None:
    """``value`` as a finite float; None for anything else (not a number, NaN, ±inf, an integer past a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _shown(value) -> str:
    """A stranger's number in a message: a huge integer by its digits, not all of them."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**15:
        return f"a number of {len(str(abs(value)))} digits"
    return clip(value, 20)


def _number(token: str, what: str) -> float:
    """A number written in a log line; one line naming it otherwise (``1.2.3``, ``e``)."""
    try:
        return float(token)
    except ValueError:
        raise ExplorerError(f"{what} must be a number, got {clip(token, 40)}") from None


def _log_field(line: str, label: str, where: str) -> float | None:
    """The number written after ``label:`` in a log line (None where the label is not there), found with
    string operations only: the word after the label, up to a space or a comma."""
    at = line.find(label + ":")
    if at < 0:
        return None
    words = line[at + len(label) + 1:].split(None, 1)
    token = words[0].split(",", 1)[0] if words else ""
    return _number(token, f"{where}: {label}") if token else None


def _log_line(line: str, where: str) -> str:
    """A log line to parse, refused past ``MAX_LINE_CHARS``."""
    if len(line) > MAX_LINE_CHARS:
        raise ExplorerError(f"{where} has {len(line):,} characters; the engines write under 1 000 (at most "
                            f"{MAX_LINE_CHARS:,} are read)")
    return line


RATES = "Per-position acceptance rate:"


def _vllm_log(text: str, name: str) -> Acceptance:
    """vLLM v1's "SpecDecoding metrics:" lines: each covers one logging interval (its counts were reset
    after it), so several lines are pooled, each weighted by its drafts (accepted / (length − 1))."""
    lines = [line for line in text.splitlines() if "SpecDecoding metrics:" in line][:100_000]
    drafts_total, accepted_total, drafted_total, weighted = 0.0, 0.0, 0.0, []
    for n, line in enumerate(lines, 1):
        where = f"log line {n}"
        line = _log_line(line, where)
        length = _log_field(line, "Mean acceptance length", where)
        accepted = _log_field(line, "Accepted", where)
        drafted = _log_field(line, "Drafted", where)
        at = line.find(RATES)
        if length is None or accepted is None or at < 0:
            raise ExplorerError(f"{where}: expected 'Mean acceptance length: …, Accepted: … tokens, "
                                "Per-position acceptance rate: …' as vLLM writes it")
        per = []
        for part in line[at + len(RATES):].split(","):  # the rates, up to ", Avg Draft acceptance rate"
            part = part.strip()
            if part.startswith("Avg"):
                break
            if part:
                per.append(_number(part, f"{where}: a per-position rate"))
        accepted = _count(accepted, f"{where}: accepted tokens")
        if not per or len(per) > MAX_GAMMA or any(not (math.isfinite(r) and 0 <= r <= 1) for r in per):
            raise ExplorerError(f"{where}: per-position rates must be 1 to {MAX_GAMMA} numbers from 0 to 1")
        if any(b > a + 1e-3 for a, b in zip(per, per[1:])):
            raise ExplorerError(f"{where}: inconsistent rates: a later position accepted more often than an "
                                "earlier one, but a draft is accepted as a prefix")
        if not math.isfinite(length) or not 1 <= length <= len(per) + 1 + 0.01:
            raise ExplorerError(f"{where}: a mean acceptance length of {length:g} is impossible with "
                                f"{len(per)} positions")
        if weighted and len(per) != len(weighted[0][1]):
            raise ExplorerError(f"{where}: {len(per)} positions where line 1 has {len(weighted[0][1])}: keep "
                                "the lines of one server")
        # the log rounds the length to 2 decimals; the rates' sum is the same quantity to 3
        drafts = accepted / sum(per) if sum(per) > 0 else (accepted / (length - 1) if length > 1 else 0.0)
        weighted.append((drafts, per))
        drafts_total += drafts
        accepted_total += accepted
        drafted_total += _count(drafted, f"{where}: drafted tokens") if drafted is not None else 0.0
    if drafts_total <= 0:
        raise ExplorerError("the vLLM log lines count no accepted drafts: nothing to analyse yet")
    k = len(weighted[0][1])
    share = tuple(sum(d * per[i] for d, per in weighted) / drafts_total for i in range(k))
    return Acceptance(name or f"vLLM · {len(lines)} log line{'s' if len(lines) > 1 else ''}", "vLLM",
                      "vLLM log (SpecDecoding metrics)", share, True, drafts_total, drafted_total or None,
                      accepted_total)


def _vllm_v0_log(text: str, name: str) -> Acceptance:
    """vLLM v0's "Speculative metrics:" line: K and token totals, no per-position counts; the last line
    holds the running totals."""
    line = _log_line([line for line in text.splitlines() if "Speculative metrics:" in line][-1], "the last log line")
    k = _log_field(line, "Number of speculative tokens", "the log line")
    accepted = _log_field(line, "Number of accepted tokens", "the log line")
    drafted = _log_field(line, "Number of draft tokens", "the log line")
    if k is None or accepted is None or drafted is None:
        raise ExplorerError("expected 'Number of speculative tokens: K, Number of accepted tokens: …, Number of draft "
                            "tokens: …' as vLLM v0 writes it")
    k = int(_count(k, "the number of speculative tokens"))
    accepted, drafted = _count(accepted, "accepted tokens"), _count(drafted, "draft tokens")
    if k < 1 or drafted < k or accepted > drafted:
        raise ExplorerError(f"inconsistent counts: {accepted:.0f} accepted of {drafted:.0f} drafted, {k} per draft")
    drafts = drafted / k
    return from_mean(name or "vLLM v0 · log", "vLLM", "vLLM v0 log (totals only)", 1 + accepted / drafts, k, drafts,
                     drafted, accepted)


def _sglang_log(text: str, gamma: int | None, name: str) -> Acceptance:
    """SGLang's decode log: "accept len: 2.31" per line; the lines' mean (the word after the marker, read
    with string operations only)."""
    values = []
    for n, line in enumerate(text.splitlines(), 1):
        at = line.find("accept len:")
        if at < 0:
            continue
        words = line[at + len("accept len:"): at + len("accept len:") + 64].split(None, 1)
        token = words[0].split(",", 1)[0] if words else ""
        value = _number(token, f"log line {n}: accept len") if token else math.nan
        if math.isfinite(value):
            values.append(value)
        if len(values) == 100_000:
            break
    if not values:
        raise ExplorerError("the SGLang log lines hold no 'accept len: <number>'")
    return _sglang(name or f"SGLang · {len(values)} log line{'s' if len(values) > 1 else ''}", "SGLang log",
                   sum(values) / len(values), None, gamma)


def _from_json(text: str, gamma: int | None, name: str) -> list[Acceptance]:
    """llama.cpp timings (a response, its ``timings``, or a list of responses), or one of the explorer's
    own files (a trace, a benchmark report)."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ExplorerError("the JSON nests too deeply") from None
    except ValueError as err:
        raise ExplorerError(f"invalid JSON ({getattr(err, 'msg', 'unreadable')})") from None
    if isinstance(data, dict) and "rounds" in data:
        from . import load_trace

        return [from_trace(load_trace(text))]
    if isinstance(data, dict) and "rows" in data:
        from .reports import load_bench_report

        return from_report(load_bench_report(text))
    return _llama_cpp(data, gamma, name)


def _llama_cpp(data, gamma: int | None, name: str) -> list[Acceptance]:
    """llama.cpp's server ``timings``: draft_n drafted, draft_n_accepted accepted, predicted_n generated.
    Each target forward emits one token of its own (a correction or the bonus) besides the accepted
    drafts, so forwards ≈ predicted_n − draft_n_accepted, and a mean acceptance length per forward is
    predicted_n / forwards. Responses are pooled per ``model``."""
    responses = data if isinstance(data, list) else [data]
    if len(responses) > 100_000:
        raise ExplorerError("more than 100 000 responses: pool fewer")
    pooled: dict[str, list[float]] = {}
    for n, response in enumerate(responses, 1):
        where = f"response {n}" if len(responses) > 1 else "the response"
        if not isinstance(response, dict):
            raise ExplorerError(f"{where} is not a JSON object with llama.cpp 'timings'")
        timings = response.get("timings", response)
        if not isinstance(timings, dict) or not {"draft_n", "draft_n_accepted", "predicted_n"} <= timings.keys():
            raise ExplorerError(f"{where} has no llama.cpp timings with draft_n, draft_n_accepted and predicted_n "
                                "(is a draft model or n-gram drafting on?)")
        model = response.get("model", "")
        model = model[:MAX_LABEL_CHARS] if isinstance(model, str) else ""
        counts = [_count(timings[k], f"{where}: {k}") for k in ("draft_n", "draft_n_accepted", "predicted_n")]
        # every target forward adds a token of its own, so the accepted drafts are fewer than the tokens generated
        # (none accepted where nothing was generated)
        if counts[1] > counts[0] or counts[1] >= counts[2] and counts[1] + counts[2] > 0:
            raise ExplorerError(f"{where}: inconsistent counts: {counts[1]:.0f} accepted of {counts[0]:.0f} drafted, "
                                f"{counts[2]:.0f} generated")
        total = pooled.setdefault(model, [0.0, 0.0, 0.0])
        for i in range(3):
            total[i] += counts[i]
        if len(pooled) > MAX_DRAFTERS:
            raise ExplorerError(f"more than {MAX_DRAFTERS} models in one file: keep the ones to compare")
    drafters = []
    for model, (drafted, accepted, generated) in pooled.items():
        label = name or ("llama.cpp" + (f" · {model}" if model else ""))
        if drafted == 0:
            raise ExplorerError(f"{label}: nothing was drafted (draft_n = 0): is speculative decoding on?")
        forwards = generated - accepted
        if forwards < 1:
            raise ExplorerError(f"{label}: {drafted:.0f} tokens drafted but none generated (predicted_n = 0): no target "
                                "forward to analyse")
        k = gamma or max(1, min(MAX_GAMMA, math.ceil(drafted / forwards)))
        if drafted > forwards * k + TOLERANCE:
            raise ExplorerError(f"{label}: {drafted:.0f} drafted tokens in ≈ {forwards:.0f} target forwards cannot "
                                f"come from drafts of at most {k}: give the --draft-max the server ran with as γ")
        drafters.append(from_mean(label, "llama.cpp", f"llama.cpp timings: totals only, {drafted / forwards:.1f} tokens "
                                  f"drafted a target forward, drafts of up to {k} assumed", generated / forwards, k,
                                  forwards, drafted, accepted))
    return drafters


# -- T(n)/T(1) measured here -------------------------------------------------------------------------


def measure_verify_cost(model: str, positions: int, progress=None) -> tuple[tuple[float, ...], str]:
    """T(n)/T(1) for n = 1 … positions + 1, measured on this machine with ``model`` (the explorer's own
    measurement, ``engine.costs``), and where it was measured in words."""
    from .api import load_cached
    from .engine.costs import verify_cost_curve

    if progress:
        progress(f"loading {model} to measure T(n) for n = 1…{positions + 1} on this machine")
    target = load_cached(model, None, None)
    if progress:
        progress(f"measuring T(n), n = 1…{positions + 1} (6 passes over the sizes)")
    curve = verify_cost_curve(target, max_tokens=positions + 1)
    where = f"model '{model}' on {target.device} ({str(target.dtype).replace('torch.', '')}; {machine.words()})"
    return tuple(t / curve[0] for t in curve), where


# -- the explorer's own runs --------------------------------------------------------------------------


def from_trace(trace, name: str | None = None) -> Acceptance:
    """A run of this explorer: accepted ÷ tested drafts at each position (a draft after a rejection is
    never tested), chained into shares; with a controller that varies γ the shares are those of drafts that
    got that far, as if every round had drafted K. Its own c is the run's measured draft cost."""
    from .trace import acceptance_by_position

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
