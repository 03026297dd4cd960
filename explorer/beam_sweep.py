"""Speculative beam search against Hugging Face's on this machine (the reproduction report's Table 3,
``python -m explorer sweep beam``): for each beam width, tokens/s, the best beam's log-probability and agreement with
Hugging Face's output. Every decode is preceded by the machine's pace probe, and a ratio to Hugging Face's beam
search timed at another pace is withheld with the reason (``explorer.ratios``).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

from .api import decode, load_cached
from .bench import load_prompts
from .hf_systems import hf_beam_search
from .pace import probe_ms
from .progress import print_progress
from .quality import token_agreement
from .ratios import pace_words


DEFAULT_BEAM_WIDTHS = (1, 3, 5)
BEAM_RULES = ("exact", "004")


def beam_sweep(model: str = "default", draft: str = "early-exit:4", widths=DEFAULT_BEAM_WIDTHS, rules=BEAM_RULES,
               max_new_tokens: int = 32, prompts: list[str] | None = None,
               progress: Callable[[int, int, str], None] | None = None) -> dict:
    """The reproduction report's Table 3 on this machine: for each beam width k, Hugging Face's beam search
    on the target and ``beam`` with each rule, on every prompt: tokens/s (and × HF beam search, measured in
    the same process), the best beam's log-probability under the target, agreement with HF's beam output
    (identical runs, token agreement) and the best beam's tokens per round (1 + its accepted steps)."""
    progress = progress or print_progress
    target = load_cached(model, None, None)
    texts = prompts if prompts is not None else [p["text"] for p in load_prompts()]
    ids = [list(target.encode(t)) for t in texts]
    for rule in rules:  # warm-up: first calls pay for allocations and lazy initialisation
        decode(target, texts[0], method="beam", draft=draft, beam_width=2, beam_rule=rule, max_new_tokens=4)
    hf_beam_search(target, ids[0], 2, 4)
    points, done, total = [], 0, len(widths) * (1 + len(rules))
    for width in widths:
        reference, hf_seconds = [], 0.0
        hf_pace: list[float] = []  # the pace probe before each of Hugging Face's decodes, then before each of ours
        for prompt_ids in ids:
            hf_pace.append(probe_ms())
            out, seconds = hf_beam_search(target, prompt_ids, width, max_new_tokens)
            reference.append(out)
            hf_seconds += seconds
        hf_tokens = sum(map(len, reference))
        hf_logprob = statistics.mean(_logprob(target, p, o) for p, o in zip(ids, reference))
        done += 1
        points.append({"width": width, "system": "hf-beam", "tokens_per_s": hf_tokens / hf_seconds,
                       "vs_hf": 1.0, "logprob": hf_logprob, "identical": len(ids), "agreement": 1.0,
                       "tokens_per_round": None, "wall_s": hf_seconds, "doubt": None})
        progress(done, total, f"[{done}/{total}] k={width} hf-beam: {hf_tokens / hf_seconds:.1f} tok/s")
        for rule in rules:
            traces, seconds, ours = [], 0.0, []
            for text in texts:
                ours.append(probe_ms())
                start = time.perf_counter()
                traces.append(decode(target, text, method="beam", draft=draft, beam_width=width, beam_rule=rule,
                                     max_new_tokens=max_new_tokens))
                seconds += time.perf_counter() - start
            tokens = sum(t.summary.new_tokens for t in traces)
            point = {"width": width, "system": f"beam:{rule}", "tokens_per_s": tokens / seconds,
                     "vs_hf": tokens / seconds / (hf_tokens / hf_seconds),
                     "logprob": statistics.mean(_logprob(target, p, list(t.output_ids)) for p, t in zip(ids, traces)),
                     "identical": sum(list(t.output_ids) == o for t, o in zip(traces, reference)),
                     "agreement": statistics.mean(token_agreement(list(t.output_ids), o) for t, o in zip(traces, reference)),
                     "tokens_per_round": tokens / sum(t.summary.rounds for t in traces), "wall_s": seconds,
                     "doubt": pace_words(ours, hf_pace, "this rule's runs", "Hugging Face's beam search")}
            points.append(point)
            done += 1
            versus = "× hf-beam withheld (see the table)" if point["doubt"] else f"{point['vs_hf']:.2f}× hf-beam"
            progress(done, total, f"[{done}/{total}] k={width} beam:{rule}: {point['tokens_per_s']:.1f} tok/s, "
                     f"{versus}, {point['identical']}/{len(ids)} identical")
    return {"points": points, "meta": {"model": model, "draft": draft, "prompts": len(texts),
                                       "max_new_tokens": max_new_tokens}}


def _logprob(target, prompt_ids: list[int], output: list[int]) -> float:
    """The target's log-probability of ``output`` after the prompt (one forward)."""
    if not output:
        return 0.0
    x = torch.tensor([prompt_ids + output], device=target.device)
    with torch.inference_mode():
        logits = target.model(input_ids=x).logits[0, len(prompt_ids) - 1: -1].float().log_softmax(dim=-1)
    return float(logits.gather(1, torch.tensor(output, device=target.device)[:, None]).sum())


def beam_markdown(report: dict) -> str:
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
