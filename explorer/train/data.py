"""Self-distillation data: the target model's own answers to a bank of prompts (EESD section 3.2).

EESD trains its exit layer on text the target itself generated, following Liu et al. (2023): a *hybrid*
of greedy and sampled generations, so that the draft learns the target's favourite continuations and also
sees the more varied text that sampling decodes. ``self_generated`` produces that corpus with batched
Hugging Face ``generate`` (left padding + attention mask, each prompt wrapped in the chat template through
``LoadedModel.encode``) and caches it on disk, one file per batch, under
``cache_root()/selfgen/<fingerprint>-<mode>-<settings hash>/``: an interrupted run resumes at the first
missing batch, and a second run with the same model, prompts and settings generates nothing.

Determinism: prompts are batched in a fixed order (by prompt length, then id), each batch is generated
under ``torch.manual_seed(seed + batch index)``, and in hybrid mode each prompt's mode is a hash of
(seed, prompt id), so it does not depend on which other prompts are in the set.

Shape legend: B batch, T time.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

from ..errors import ExplorerError
from ..models import LoadedModel, cache_root, quiet_transformers
from ..progress import print_progress

PROMPT_BANK = Path(__file__).resolve().parent.parent.parent / "assets" / "train_prompts.json"
MODES = ("greedy", "sample", "hybrid")
HYBRID_GREEDY_SHARE = 0.5  # Liu et al. (2023) mix greedy and sampled generations; EESD 3.2 adopts the mix
CACHE_VERSION = 1

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Sample:
    """One prompt (chat-templated ids) and the target's answer to it, ending with EOS when it stopped there."""

    prompt_ids: tuple[int, ...]
    answer_ids: tuple[int, ...]
    prompt_id: str
    split: str  # "train" | "heldout"
    mode: str  # "greedy" | "sample": how this answer was decoded (hybrid runs hold both)


def load_prompt_bank(split: str | None = None, path: Path | None = None) -> list[dict]:
    """The training prompts: dicts with ``id``, ``category``, ``prompt`` and ``split`` (train | heldout)."""
    path = Path(path or PROMPT_BANK)
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))["prompts"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ExplorerError(f"cannot read the prompt bank {path}: {err!r:.120} "
                            '(expected {"prompts": [{"id", "prompt", "split"}, ...]})') from None
    if not isinstance(entries, list):
        raise ExplorerError(f"{path.name}: 'prompts' must be a list")
    if split not in (None, "train", "heldout"):
        raise ExplorerError(f"unknown split {split!r}: use 'train', 'heldout' or None (both)")
    for e in entries:
        if not isinstance(e, dict) or not {"id", "prompt", "split"} <= e.keys() or e["split"] not in ("train", "heldout"):
            raise ExplorerError(f"{path.name}: each prompt needs an id, a prompt and a split (train | heldout): {e!r:.80}")
    return [e for e in entries if split is None or e["split"] == split]


def self_generated(target: LoadedModel, prompts: list[dict], mode: str = "greedy", max_new_tokens: int = 128,
                   seed: int = 0, batch_size: int = 16, temperature: float = 0.8, top_p: float = 0.95,
                   progress: Progress | None = None) -> list[Sample]:
    """The target's answers to ``prompts`` (prompt-bank entries), decoded greedily, by sampling or both.

    Returned in the order of ``prompts``. Cached per batch on disk (see the module docstring);
    ``progress(done, total, line)`` is called after each batch (default: the line on stderr).
    """
    if mode not in MODES:
        raise ExplorerError(f"unknown generation mode {mode!r}: use one of {', '.join(MODES)}")
    if max_new_tokens < 1 or batch_size < 1:
        raise ExplorerError("max_new_tokens and batch_size must be at least 1")
    if mode != "greedy" and not (temperature > 0 and 0 < top_p <= 1):
        raise ExplorerError("sampling needs temperature > 0 and 0 < top_p <= 1")
    if not prompts:
        return []
    progress = progress or print_progress
    encoded = {p["id"]: tuple(target.encode(p["prompt"])) for p in prompts}
    batches = _plan_batches(prompts, encoded, mode, seed, batch_size)
    folder = _cache_folder(target, prompts, mode, max_new_tokens, seed, batch_size, temperature, top_p)
    folder.mkdir(parents=True, exist_ok=True)
    samples: dict[str, Sample] = {}
    done_prompts, new_tokens, gen_seconds = 0, 0, 0.0
    for index, (batch_mode, batch) in enumerate(batches):
        file = folder / f"batch-{index:04d}.json"
        cached = _read_batch(file)
        if cached is None:
            start = time.perf_counter()
            answers = _generate(target, [encoded[p["id"]] for p in batch], batch_mode, max_new_tokens,
                                seed + index, temperature, top_p)
            gen_seconds += time.perf_counter() - start
            new_tokens += sum(len(a) for a in answers)
            cached = [Sample(encoded[p["id"]], a, p["id"], p.get("split", "train"), batch_mode)
                      for p, a in zip(batch, answers)]
            _write_batch(file, cached)
        samples.update((s.prompt_id, s) for s in cached)
        done_prompts += len(batch)
        rate = f"{new_tokens / gen_seconds:.0f} tok/s" if gen_seconds else "cached"
        progress(done_prompts, len(prompts),
                 f"[selfgen {mode}] {done_prompts}/{len(prompts)} prompts · batch {index + 1}/{len(batches)} "
                 f"· {new_tokens} new tokens · {rate}")
    return [samples[p["id"]] for p in prompts]


def _plan_batches(prompts, encoded, mode, seed, batch_size) -> list[tuple[str, list[dict]]]:
    """Fixed batches of similar-length prompts (less padding), one decoding mode per batch."""
    ids = [p["id"] for p in prompts]
    if len(set(ids)) != len(ids):
        raise ExplorerError("prompt ids must be unique")
    groups: dict[str, list[dict]] = {}
    for p in prompts:
        groups.setdefault(_prompt_mode(p["id"], mode, seed), []).append(p)
    batches = []
    for batch_mode in ("greedy", "sample"):
        group = sorted(groups.get(batch_mode, []), key=lambda p: (len(encoded[p["id"]]), p["id"]))
        batches += [(batch_mode, group[i:i + batch_size]) for i in range(0, len(group), batch_size)]
    return batches


def _prompt_mode(prompt_id: str, mode: str, seed: int) -> str:
    if mode != "hybrid":
        return mode
    digest = hashlib.sha1(f"{seed}:{prompt_id}".encode()).digest()
    return "greedy" if digest[0] / 256 < HYBRID_GREEDY_SHARE else "sample"


@torch.no_grad()
def _generate(target: LoadedModel, prompts: list[tuple[int, ...]], mode: str, max_new_tokens: int, seed: int,
              temperature: float, top_p: float) -> list[tuple[int, ...]]:
    """One batched ``generate`` call; each answer is cut after its first EOS (padding stripped)."""
    eos = target.eos_token_ids
    pad = min(eos) if eos else 0
    width = max(len(p) for p in prompts)
    input_ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], device=target.device)  # (B, T)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=target.device)  # (B, T)
    sampling = dict(do_sample=True, temperature=temperature, top_p=top_p, top_k=0) if mode == "sample" \
        else dict(do_sample=False)
    torch.manual_seed(seed)
    with quiet_transformers():
        out = target.model.generate(input_ids=input_ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                                    min_new_tokens=0, pad_token_id=pad, eos_token_id=sorted(eos) or None,
                                    **sampling)
    answers = []
    for row in out[:, width:].tolist():  # (B, new)
        stop = next((i for i, t in enumerate(row) if t in eos), None)
        answers.append(tuple(row if stop is None else row[: stop + 1]))
    return answers


def _cache_folder(target, prompts, mode, max_new_tokens, seed, batch_size, temperature, top_p) -> Path:
    from ..artifacts import fingerprint

    settings = dict(version=CACHE_VERSION, max_new_tokens=max_new_tokens, seed=seed, batch_size=batch_size,
                    prompts=[[p["id"], p["prompt"], p.get("split", "train")] for p in prompts])
    if mode != "greedy":
        settings.update(temperature=temperature, top_p=top_p)
    digest = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root() / "selfgen" / f"{fingerprint(target.model)}-{mode}-{digest}"


def _read_batch(file: Path) -> list[Sample] | None:
    try:
        rows = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return [Sample(tuple(r["prompt_ids"]), tuple(r["answer_ids"]), r["prompt_id"], r["split"], r["mode"])
            for r in rows]


def _write_batch(file: Path, samples: list[Sample]) -> None:
    """Write-then-rename, so that an interrupted run never leaves half a batch behind."""
    tmp = file.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps([asdict(s) for s in samples]), encoding="utf-8")
    tmp.replace(file)

