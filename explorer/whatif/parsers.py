"""The engines' own numbers, each format read as the engine writes it:

- vLLM (v1): the Prometheus counters ``vllm:spec_decode_num_drafts``, ``…_num_draft_tokens``,
  ``…_num_accepted_tokens`` and ``…_num_accepted_tokens_per_pos{position="i"}`` (i from 0) at ``/metrics``
  (``prometheus``), and the log line "SpecDecoding metrics: Mean acceptance length: …, Per-position acceptance
  rate: …" (``vllm_log``); vLLM v0's "Speculative metrics: … Number of speculative tokens: K, Number of accepted
  tokens: …" line (``vllm_v0_log``);
- llama.cpp's server: ``timings`` in each response (``draft_n``, ``draft_n_accepted``, ``predicted_n``:
  ``llama_cpp``);
- SGLang: the gauge ``sglang:spec_accept_length`` (and ``sglang:spec_accept_rate``, in ``prometheus``), or
  "accept len: …" in its decode log (``sglang_log``).

Everything read here is untrusted: lines are bounded before a parser reads them, log lines are read with string
operations only (a regular expression over them backtracked), a /metrics page with patterns that cannot backtrack
(``_samples``), every count is checked (``counts``), and refusals are ``ExplorerError`` lines; a file none of them
reads is refused naming every format read (``FORMATS``). Plain Python: no torch.
"""

from __future__ import annotations

import math
import re

from ..errors import ExplorerError
from ..limits import MAX_GAMMA, clip
from .counts import MAX_DRAFTERS, MAX_LABEL_CHARS, TOLERANCE, check_count, from_counts, from_mean
from .model import Acceptance

# A line that is parsed: vLLM's longest (64 positions) is under 1 000 characters, a /metrics sample a few hundred.
# The Prometheus parser copies the rest of a line once per label (one 1 MB line took 5.7 s), so lines are bounded
# before it reads them; the log lines are read with string operations only (a regular expression over them
# backtracked: 2 000 spaces took 10 s with the GIL held, issue 40).
MAX_LINE_CHARS = 2048


def _label_name(engine: str, labels: dict) -> str:
    """A drafter's name from its labels, each value clipped (labels are the stranger's text)."""
    parts = [f"{k}={v[:MAX_LABEL_CHARS]}" for k, v in sorted(labels.items())[:6]]
    return f"{engine}" + (f" · {', '.join(parts)}" if parts else "")


VLLM = "vllm:spec_decode_"
VLLM_COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "num_accepted_tokens_per_pos")
SGLANG = ("sglang:spec_accept_length", "sglang:spec_accept_rate")
# Every format What if reads, named in each refusal of a file it cannot place
FORMATS = ("What if reads vLLM v1 (/metrics, 'SpecDecoding metrics' log lines), vLLM v0 ('Speculative metrics' "
           "lines), SGLang (/metrics, 'accept len' lines), llama.cpp timings JSON and this explorer's traces and reports")

# A Prometheus sample line, read with patterns that cannot backtrack: possessive quantifiers (Python 3.11) over
# disjoint character classes, so each character is looked at a bounded number of times. prometheus_client's own
# parser walked a line character by character in Python and copied its rest once per label: 2 000 lines of one
# label holding 900 escaped quotes (3.6 MB) took 2.0 CPU s (issue 51); this reads them in a fraction of that.
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*+")
_LABEL = re.compile(r'\s*+([a-zA-Z_][a-zA-Z0-9_]*+)\s*+=\s*+"((?:[^"\\\n]++|\\.)*+)"\s*+(?:,|(?=\}))')


def _unescape(value: str) -> str:
    """A label value as written (``\\\\``, ``\\"`` and ``\\n`` escaped), with string operations only: a function
    called per escape took 0.4 CPU s over 1.8 million of them."""
    if "\\" not in value:
        return value
    return "\\".join(part.replace('\\"', '"').replace("\\n", "\n") for part in value.split("\\\\"))


def _samples(text: str):
    """(name, labels, value) of every sample line whose metric What if reads (vLLM's spec-decode counters,
    SGLang's accept length and rate); ``ExplorerError`` naming the formats it reads for a line that is not a
    Prometheus sample (``name{label="value",…} value [timestamp]``). Other metrics' lines are only checked."""
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) > MAX_LINE_CHARS:
            raise ExplorerError(f"line {n} has {len(line):,} characters; a metrics line is a few hundred (at most "
                                f"{MAX_LINE_CHARS:,} are read): is this a /metrics page?")
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name = _NAME.match(line)
        if name is None:
            raise ExplorerError(f"line {n} is not a metric sample: {FORMATS}")
        name = name.group()
        base = name.removesuffix("_total")
        wanted = (base.startswith(VLLM) and base[len(VLLM):] in VLLM_COUNTERS) or base in SGLANG
        rest = line[len(name):]
        labels = {}
        if rest.startswith("{"):
            if not wanted:  # only its shape: the labels' end, then a value
                rest = rest[rest.rfind("}") + 1:] if "}" in rest else ""
            else:
                at = 1
                while not rest.startswith("}", at):
                    label = _LABEL.match(rest, at)
                    if label is None:
                        raise ExplorerError(f"line {n}: {clip(name, 60)} has labels that are not `name=\"value\"`")
                    labels[label.group(1)] = _unescape(label.group(2))
                    at = label.end()
                rest = rest[at + 1:]
        words = rest.split()
        if not 1 <= len(words) <= 2 or not rest[:1].isspace():
            raise ExplorerError(f"line {n} is not a metric sample: {FORMATS}")
        try:
            value = float(words[0])
        except ValueError:
            if not wanted:  # not a sample at all: words, an HTML page, …
                raise ExplorerError(f"line {n} is not a metric sample: {FORMATS}") from None
            raise ExplorerError(f"line {n}: {clip(name, 60)} has the value {clip(words[0], 30)}, not a number") from None
        if wanted:
            yield base, labels, value


def prometheus(text: str, gamma: int | None) -> list[Acceptance]:
    """vLLM's spec-decode counters and SGLang's accept-length gauge from Prometheus exposition text, one
    drafter per label set (model_name, engine, …; the position label aside)."""
    vllm: dict[tuple, dict] = {}
    sglang: dict[tuple, dict] = {}
    for base, labels, value in _samples(text):
        if base.startswith(VLLM):
            position = labels.pop("position", None)
            entry = vllm.setdefault(tuple(sorted(labels.items())), {"per_position": {}})
            if base.endswith("_per_pos"):
                if position is None or not position.isdigit() or int(position) >= MAX_GAMMA:
                    raise ExplorerError(f"a per-position counter has position {clip(position, 20)}; "
                                        f"expected 0 to {MAX_GAMMA - 1}")
                entry["per_position"][int(position)] = value
            else:
                entry[base[len(VLLM):]] = value
        else:
            sglang.setdefault(tuple(sorted(labels.items())), {})[base.split(":spec_")[1]] = value
        if len(vllm) + len(sglang) > MAX_DRAFTERS:
            raise ExplorerError(f"more than {MAX_DRAFTERS} engines or models in one file: keep the ones to compare")
    drafters = []
    for labels, entry in vllm.items():
        name = _label_name("vLLM", dict(labels))
        per = entry["per_position"]
        if sorted(per) != list(range(len(per))):
            raise ExplorerError(f"{name}: per-position counters for positions {sorted(per)[:8]}: some are missing")
        drafts = entry.get("num_drafts")
        if drafts is None and gamma is not None and entry.get("num_draft_tokens") is not None:
            # vLLM v0 counts no drafts: every draft has γ tokens
            drafts = check_count(entry["num_draft_tokens"], f"{name}: draft tokens") / gamma
        if drafts is None:
            raise ExplorerError(f"{name}: no vllm:spec_decode_num_drafts counter (vLLM v0?): give the draft length γ "
                                "(num_speculative_tokens) to count drafts from the draft tokens")
        if not per:
            drafts = check_count(drafts, f"{name}: the number of drafts")
            if drafts == 0:
                raise ExplorerError(f"{name}: no drafts counted yet: send some requests with speculative decoding on")
            mean = 1 + check_count(entry.get("num_accepted_tokens", 0.0), f"{name}: accepted tokens") / drafts
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


def vllm_log(text: str, name: str) -> Acceptance:
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
        accepted = check_count(accepted, f"{where}: accepted tokens")
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
        drafted_total += check_count(drafted, f"{where}: drafted tokens") if drafted is not None else 0.0
    if drafts_total <= 0:
        raise ExplorerError("the vLLM log lines count no accepted drafts: nothing to analyse yet")
    k = len(weighted[0][1])
    share = tuple(sum(d * per[i] for d, per in weighted) / drafts_total for i in range(k))
    return Acceptance(name or f"vLLM · {len(lines)} log line{'s' if len(lines) > 1 else ''}", "vLLM",
                      "vLLM log (SpecDecoding metrics)", share, True, drafts_total, drafted_total or None,
                      accepted_total)


def vllm_v0_log(text: str, name: str) -> Acceptance:
    """vLLM v0's "Speculative metrics:" line: K and token totals, no per-position counts; the last line
    holds the running totals."""
    line = _log_line([line for line in text.splitlines() if "Speculative metrics:" in line][-1], "the last log line")
    k = _log_field(line, "Number of speculative tokens", "the log line")
    accepted = _log_field(line, "Number of accepted tokens", "the log line")
    drafted = _log_field(line, "Number of draft tokens", "the log line")
    if k is None or accepted is None or drafted is None:
        raise ExplorerError("expected 'Number of speculative tokens: K, Number of accepted tokens: …, Number of draft "
                            "tokens: …' as vLLM v0 writes it")
    k = int(check_count(k, "the number of speculative tokens"))
    accepted, drafted = check_count(accepted, "accepted tokens"), check_count(drafted, "draft tokens")
    if k < 1 or drafted < k or accepted > drafted:
        raise ExplorerError(f"inconsistent counts: {accepted:.0f} accepted of {drafted:.0f} drafted, {k} per draft")
    drafts = drafted / k
    return from_mean(name or "vLLM v0 · log", "vLLM", "vLLM v0 log (totals only)", 1 + accepted / drafts, k, drafts,
                     drafted, accepted)


def sglang_log(text: str, gamma: int | None, name: str) -> Acceptance:
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


def llama_cpp(data, gamma: int | None, name: str) -> list[Acceptance]:
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
        counts = [check_count(timings[k], f"{where}: {k}") for k in ("draft_n", "draft_n_accepted", "predicted_n")]
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
