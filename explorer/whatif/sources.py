"""One file to its drafters (``read``): bounded and decoded, then told apart by what it holds: an engine's
/metrics page, log lines or timings (``parsers``), or one of the explorer's own traces and benchmark reports
(``runs``)."""

from __future__ import annotations

import json

from ..errors import ExplorerError
from ..limits import MAX_GAMMA, clip
from .model import Acceptance
from .parsers import FORMATS, SGLANG, VLLM, llama_cpp, prometheus, sglang_log, vllm_log, vllm_v0_log
from .runs import from_report, from_trace

MAX_METRICS_BYTES = 4 * 2**20  # a vLLM /metrics page is 50–300 KB; a day of log lines a few MB


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
    logged = [kind for kind, marker in LOG_MARKERS.items() if marker in text]
    if stripped[0] in "[{" and not (logged and not _is_json(stripped)):  # log lines may open with "[time]"
        return _from_json(stripped, gamma, name)
    if len(logged) > 1:
        raise ExplorerError(f"this mixes {', '.join(logged[:-1])} and {logged[-1]} log lines: give one at a time. "
                            f"{FORMATS}")
    if logged and any(counter in text for counter in (VLLM, *SGLANG)):
        raise ExplorerError(f"this mixes {logged[0]} log lines and a /metrics page: give one at a time. {FORMATS}")
    if logged:
        return [LOG_READERS[logged[0]](text, gamma, name)]
    return prometheus(text, gamma)


# the log lines each engine writes, by the marker that tells them apart, and their readers
LOG_MARKERS = {"vLLM v1": "SpecDecoding metrics:", "vLLM v0": "Speculative metrics:", "SGLang": "accept len:"}
LOG_READERS = {"vLLM v1": lambda text, gamma, name: vllm_log(text, name),
               "vLLM v0": lambda text, gamma, name: vllm_v0_log(text, name), "SGLang": sglang_log}


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _too_big(size: int) -> str:
    return (f"the file has {size / 2**20:.1f} MB; at most {MAX_METRICS_BYTES // 2**20} MB are read (one /metrics "
            "page or a log excerpt is far less)")


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
        from .. import load_trace

        return [from_trace(load_trace(text))]
    if isinstance(data, dict) and "rows" in data:
        from ..reports import load_bench_report

        return from_report(load_bench_report(text))
    return llama_cpp(data, gamma, name)
