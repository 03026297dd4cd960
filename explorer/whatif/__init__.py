"""What if: acceptance by draft position and the best γ, from a serving engine's own counters.

Production engines export the counts behind speculative decoding but not the decision they imply: vLLM's
per-position counters and log lines, llama.cpp's ``timings``, SGLang's accept length. Each becomes an
``Acceptance``, the share a_i of drafts whose position i was accepted, i = 1 … K, and the analysis gives the tokens
per target forward and the speed-up of each draft length γ (Leviathan et al.'s Theorem 3.8, verification priced as
measured), the best γ and the i.i.d. fit beside it. Sources that export only a mean (llama.cpp, SGLang, vLLM v0)
give no per-position figures: there the i.i.d. fit is all there is, and the result says so.

- ``model``: the ``Acceptance`` record, the maths (E(γ), S(γ), the best γ, the i.i.d. α), the prices a user types
  and the analysis in words;
- ``counts``: an engine's counts to an ``Acceptance``, each checked;
- ``parsers``: the engines' formats (vLLM /metrics and log lines, vLLM v0, SGLang, llama.cpp timings);
- ``sources``: one file to its drafters (``read``), whichever it is;
- ``runs``: the explorer's own traces and benchmark reports, and T(n)/T(1) measured here.

Everything read here is untrusted (a stranger's upload on a public Space): sizes are bounded, every count
checked (finite, whole, not negative, consistent with the others), and refusals are ``ExplorerError``
lines. No torch: ``runs.measure_verify_cost`` loads a model (and torch) when it is called, and a trace file is read
with ``explorer.load_trace``.
"""

from .counts import MAX_COUNT, MAX_DRAFTERS, MAX_LABEL_CHARS, TOLERANCE, from_counts, from_mean
from .model import (DEFAULT_DRAFT_COST, KNOB, MAX_DRAFT_COST, Acceptance, advice, analyse, analyse_all, best_gamma,
                    check_draft_cost, check_verify_cost, expected_tokens, explain, iid_alpha, parse_verify_cost,
                    speedups, verify_ratio)
from .parsers import MAX_LINE_CHARS, RATES, VLLM, VLLM_COUNTERS
from .runs import from_report, from_trace, measure_verify_cost
from .sources import MAX_METRICS_BYTES, read

__all__ = [
    "DEFAULT_DRAFT_COST", "KNOB", "MAX_COUNT", "MAX_DRAFTERS", "MAX_DRAFT_COST", "MAX_LABEL_CHARS", "MAX_LINE_CHARS",
    "MAX_METRICS_BYTES", "RATES", "TOLERANCE", "VLLM", "VLLM_COUNTERS", "Acceptance", "advice", "analyse",
    "analyse_all", "best_gamma", "check_draft_cost", "check_verify_cost", "expected_tokens", "explain",
    "from_counts", "from_mean", "from_report", "from_trace", "iid_alpha", "measure_verify_cost", "parse_verify_cost",
    "read", "speedups", "verify_ratio",
]
