"""Speculative beam search against Hugging Face's on this machine (the reproduction report's Table 3,
``python -m explorer sweep beam``), decoded by the runner (``explorer.sweep.run``): for each beam width k, Hugging
Face's beam search on the target (this sweep's baseline, a row of its own) and ``beam`` with each rule, on every
prompt: tokens/s (and × HF beam search, measured in the same process), the best beam's log-probability under the
target, agreement with HF's output (identical runs, token agreement) and the best beam's tokens per round (1 + its
accepted steps). A ratio to Hugging Face's beam search timed at another pace is withheld with the reason
(``explorer.ratios``). Our decodes are timed with their pace probes inside (one at each end, ≈ 11 ms each, and one
about every half second between rounds: pace.py), Hugging Face's with the probe before each call outside, so the
ratio errs against ours, never for it.
"""

from __future__ import annotations

import statistics

import torch

from ...hf_systems import hf_beam_search
from ...pace import probe_ms
from ...quality import token_agreement
from ...ratios import pace_words
from ..sweep_record import Axis, Baseline, Lab, Reference, Runs, Sweep
from .rules import MAX_WIDTH, RULES

DEFAULT_BEAM_WIDTHS = (1, 3, 5)
HF = "Hugging Face's beam search"


def grid(values: dict) -> list[dict]:
    return [{"width": width, "rule": rule} for width in values["widths"] for rule in RULES]


def options(point: dict, settings: dict) -> dict:
    return {"beam_width": point["width"], "beam_rule": point["rule"]}


def warm(lab: Lab) -> None:
    """First calls pay for allocations and lazy initialisation: each rule and Hugging Face's beam search, once."""
    for rule in RULES:
        lab.decode(lab.texts[0], beam_width=2, beam_rule=rule, max_new_tokens=4)
    hf_beam_search(lab.target, lab.ids[0], 2, 4)


def hf_reference(lab: Lab, width: int) -> Reference:
    """Hugging Face's beam search at ``width`` on every prompt, the pace probed before each call: the reference of
    this width's rows, and a row itself."""
    outputs, seconds, pace = [], 0.0, []
    for prompt_ids in lab.ids:
        pace.append(probe_ms())
        out, took = hf_beam_search(lab.target, prompt_ids, width, lab.max_new_tokens)
        outputs.append(out)
        seconds += took
    tokens = sum(map(len, outputs))
    row = {"width": width, "system": "hf-beam", "tokens_per_s": tokens / seconds, "vs_hf": 1.0,
           "logprob": statistics.mean(_logprob(lab.target, p, o) for p, o in zip(lab.ids, outputs)),
           "identical": len(lab.ids), "agreement": 1.0, "tokens_per_round": None, "wall_s": seconds, "doubt": None}
    return Reference(HF, outputs, tokens / seconds, pace, row=row)


def row(point: dict, runs: Runs) -> dict:
    traces, lab = runs.traces, runs.lab
    tokens = sum(t.summary.new_tokens for t in traces)
    return {"width": point["width"], "system": f"beam:{point['rule']}", "tokens_per_s": tokens / runs.seconds,
            "vs_hf": tokens / runs.seconds / runs.reference.tokens_per_s,
            "logprob": statistics.mean(_logprob(lab.target, p, list(t.output_ids)) for p, t in zip(lab.ids, traces)),
            "identical": sum(list(t.output_ids) == o for t, o in zip(traces, runs.against)),
            "agreement": statistics.mean(token_agreement(list(t.output_ids), o) for t, o in zip(traces, runs.against)),
            "tokens_per_round": tokens / sum(t.summary.rounds for t in traces), "wall_s": runs.seconds,
            "doubt": pace_words(runs.pace, runs.reference.pace, "this rule's runs", runs.reference.name)}


def _logprob(target, prompt_ids: list[int], output: list[int]) -> float:
    """The target's log-probability of ``output`` after the prompt (one forward)."""
    if not output:
        return 0.0
    x = torch.tensor([prompt_ids + output], device=target.device)
    with torch.inference_mode():
        logits = target.model(input_ids=x).logits[0, len(prompt_ids) - 1: -1].float().log_softmax(dim=-1)
    return float(logits.gather(1, torch.tensor(output, device=target.device)[:, None]).sum())


def words(p: dict, lab: Lab) -> str:
    if p["system"] == "hf-beam":
        return f"k={p['width']} hf-beam: {p['tokens_per_s']:.1f} tok/s"
    versus = "× hf-beam withheld (see the table)" if p["doubt"] else f"{p['vs_hf']:.2f}× hf-beam"
    return f"k={p['width']} {p['system']}: {p['tokens_per_s']:.1f} tok/s, {versus}, {p['identical']}/{len(lab.ids)} identical"


def table(report: dict) -> str:
    """The sweep as a table; a ratio to Hugging Face's beam search timed at another pace is "withheld (k)" with a
    note (``explorer.ratios``)."""
    lines = ["| k | system | tok/s | × HF beam search | best beam's log-probability (mean) | identical to HF | "
             "token agreement with HF | best beam's tokens per round |", "|" + "---|" * 8]
    notes = []
    for p in report["points"]:
        steps = "–" if p["tokens_per_round"] is None else f"{p['tokens_per_round']:.2f}"
        if p.get("doubt"):
            notes.append(f"{len(notes) + 1}. k = {p['width']}, {p['system']}: {p['doubt']}.")
        versus = f"withheld ({len(notes)})" if p.get("doubt") else f"{p['vs_hf']:.2f}"
        lines.append(f"| {p['width']} | {p['system']} | {p['tokens_per_s']:.1f} | {versus} | {p['logprob']:.2f} "
                     f"| {p['identical']}/{report['meta']['prompts']} | {p['agreement']:.2f} | {steps} |")
    if notes:
        lines += ["", "Withheld, not printed as facts (a fair figure needs a quiet machine):", "", *notes]
    m = report["meta"]
    lines.append(f"\n{m['model']} with {m['draft']}, {m['prompts']} prompts, {m['max_new_tokens']} new tokens, greedy.")
    return "\n".join(lines)


SWEEP = Sweep(
    name="beam", help="speculative beam search against Hugging Face's (004's Table 3)",
    axes=(Axis("widths", "width", DEFAULT_BEAM_WIDTHS, "beam: beam widths k, comma-separated", whole=True, low=1,
               high=MAX_WIDTH),),
    grid=grid, options=options, row=row, words=words, table=table,
    group=lambda point: point["width"], baseline=Baseline(warm, hf_reference),
)
