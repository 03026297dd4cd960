"""Self-distillation data: the target model's own answers to a bank of prompts (EESD section 3.2).

EESD trains its exit layer on text the target itself generated, following Liu et al. (2023): a *hybrid*
of greedy and sampled generations, so that the draft learns the target's favourite continuations and also
sees the more varied text that sampling decodes. ``self_generated`` produces that corpus in batches on the
engine's fast path (``train.generate``: left padding, each prompt wrapped in the chat template through
``LoadedModel.encode``) and caches it on disk, one file per batch, under
``cache_root()/selfgen/<fingerprint>-<mode>-<settings hash>/``: an interrupted run resumes at the first
missing batch, and a second run with the same model, prompts and settings generates nothing.

Shipped answers: ``export_corpus`` writes each pass as ``assets/selfgen/<cache folder name>.npz`` (prompt
ids, answer lengths and token ids, about 2 bytes a token). A batch missing from the cache is read from
that archive when it holds the batch's prompts, so a fresh machine trains on the same answers without
generating them (``corpus`` and ``self_generated`` with the same settings); only the frozen features
(``train.features``) are computed again.

Determinism: prompts are batched in a fixed order (by prompt length, then id), each batch is generated
with the seed ``seed + batch index``, and in hybrid mode each prompt's mode is a hash of
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

from ..errors import ExplorerError
from ..models import LoadedModel, cache_root
from ..progress import print_progress
from ..shipped import ASSETS
from .generate import generate_batch

PROMPT_BANK = ASSETS / "train_prompts.json"
MODES = ("greedy", "sample", "hybrid")
CORPUS_MODES = MODES + ("greedy+sample",)  # greedy+sample: a greedy pass, then sampled passes (``corpus``)
MAX_PASSES = 20  # passes over the prompt bank when one pass gives fewer tokens than asked
SAMPLING = (0.8, 0.95)  # temperature, top-p of the sampled answers
SHIPPED = ASSETS / "selfgen"  # answers shipped with the explorer
HYBRID_GREEDY_SHARE = 0.5  # Liu et al. (2023) mix greedy and sampled generations; EESD 3.2 adopts the mix
CACHE_VERSION = 2  # 2: batches decoded on the fast path (train.generate), not HF generate

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
                   seed: int = 0, batch_size: int = 16, temperature: float = SAMPLING[0], top_p: float = SAMPLING[1],
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
    shipped: dict[str, tuple[int, ...]] | None = None
    done_prompts, new_tokens, gen_seconds = 0, 0, 0.0
    for index, (batch_mode, batch) in enumerate(batches):
        file = folder / f"batch-{index:04d}.json"
        cached = _read_batch(file)
        if cached is None:
            shipped = _read_archive(folder.name, target.vocab_size) if shipped is None else shipped
            if all(p["id"] in shipped for p in batch):
                cached = [Sample(encoded[p["id"]], shipped[p["id"]], p["id"], p.get("split", "train"), batch_mode)
                          for p in batch]
                _write_batch(file, cached)
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


def corpus(target: LoadedModel, prompts: list[dict], tokens: int, mode: str = "greedy+sample",
           max_new_tokens: int = 256, seed: int = 0, batch_size: int = 48,
           progress: Progress | None = None) -> list[Sample]:
    """At least ``tokens`` answer tokens: a first pass over ``prompts`` in ``mode`` (``greedy+sample``: greedy),
    then sampled passes with seeds ``seed`` + 1, + 2, … (each pass cached by ``self_generated``), cut at
    the answer that reaches ``tokens``."""
    samples, total = [], 0
    for rnd, (_, _, answers) in enumerate(_passes(target, prompts, mode, max_new_tokens, seed, batch_size, progress)):
        if rnd and mode == "greedy":
            raise ExplorerError(f"greedy answers to the bank give only {total} tokens, fewer than {tokens} asked: "
                                "ask for fewer or use mode greedy+sample, hybrid or sample")
        for sample in answers:
            samples.append(sample)
            total += len(sample.answer_ids)
            if total >= tokens:
                return samples
        if not samples:
            break
    raise ExplorerError(f"the prompt bank gave only {total} tokens in {MAX_PASSES} passes: ask for fewer tokens")


def export_corpus(target: LoadedModel, prompts: list[dict], tokens: int, mode: str = "greedy+sample",
                  max_new_tokens: int = 256, seed: int = 0, batch_size: int = 48, progress: Progress | None = None,
                  folder: Path | None = None) -> list[Path]:
    """Write the passes ``corpus`` reads (generated now unless cached) as archives that ship in the repository
    (``assets/selfgen/``), so that any machine trains on the same answers without generating them; the
    held-out prompts' greedy answers too. Returns the archives written."""
    folder = Path(folder or SHIPPED)
    train = [p for p in prompts if p.get("split", "train") == "train"]
    heldout = [p for p in prompts if p.get("split") == "heldout"]
    written, total = [], 0
    for pass_mode, pass_seed, answers in _passes(target, train, mode, max_new_tokens, seed, batch_size, progress):
        written.append(_write_archive(folder, _cache_folder(target, train, pass_mode, max_new_tokens, pass_seed,
                                                            batch_size, *SAMPLING).name, answers))
        total += sum(len(s.answer_ids) for s in answers)
        if total >= tokens or mode == "greedy":
            break
    if heldout:
        answers = self_generated(target, heldout, "greedy", max_new_tokens, seed, batch_size, progress=progress)
        written.append(_write_archive(folder, _cache_folder(target, heldout, "greedy", max_new_tokens, seed,
                                                            batch_size, *SAMPLING).name, answers))
    return written


def _passes(target, prompts, mode, max_new_tokens, seed, batch_size, progress):
    """(mode, seed, answers) of each pass over ``prompts``: the first in ``mode`` (greedy+sample: greedy),
    then sampled ones."""
    if mode not in CORPUS_MODES:
        raise ExplorerError(f"unknown mode {mode!r}: use one of {', '.join(CORPUS_MODES)}")
    first = "greedy" if mode == "greedy+sample" else mode
    for rnd in range(MAX_PASSES):
        pass_mode = first if rnd == 0 else "sample"
        yield pass_mode, seed + rnd, self_generated(target, prompts, pass_mode, max_new_tokens, seed + rnd,
                                                    batch_size, progress=progress)


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


def _generate(target: LoadedModel, prompts: list[tuple[int, ...]], mode: str, max_new_tokens: int, seed: int,
              temperature: float, top_p: float) -> list[tuple[int, ...]]:
    """One batch of answers, each cut after its first EOS (``train.generate``: the fast path)."""
    return generate_batch(target, prompts, mode, max_new_tokens, seed, temperature, top_p)


def _cache_folder(target, prompts, mode, max_new_tokens, seed, batch_size, temperature, top_p) -> Path:
    from ..artifacts import fingerprint

    settings = dict(version=CACHE_VERSION, max_new_tokens=max_new_tokens, seed=seed, batch_size=batch_size,
                    prompts=[[p["id"], p["prompt"], p.get("split", "train")] for p in prompts])
    if mode != "greedy":
        settings.update(temperature=temperature, top_p=top_p)
    digest = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root() / "selfgen" / f"{fingerprint(target.model)}-{mode}-{digest}"


def _write_archive(folder: Path, name: str, samples: list[Sample]) -> Path:
    """``<folder>/<name>.npz``: the answers' prompt ids, lengths and tokens (uint16 where ids fit)."""
    import numpy as np

    tokens = [t for s in samples for t in s.answer_ids]
    dtype = np.uint16 if max(tokens, default=0) < 2 ** 16 else np.int32
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.npz"
    np.savez_compressed(path, prompt_id=np.array([s.prompt_id for s in samples]),
                        answer_length=np.array([len(s.answer_ids) for s in samples], dtype=np.int32),
                        tokens=np.array(tokens, dtype=dtype))
    return path


def _read_archive(name: str, vocab_size: int) -> dict[str, tuple[int, ...]]:
    """prompt id → answer ids from the archive shipped for the cache folder ``name``; {} when there is none
    or it does not hold together (lengths that do not add up, ids outside the vocabulary)."""
    import numpy as np

    try:
        with np.load(SHIPPED / f"{name}.npz", allow_pickle=False) as data:
            ids, lengths, tokens = data["prompt_id"], data["answer_length"].astype(np.int64), data["tokens"]
    except (OSError, ValueError, KeyError):
        return {}
    if len(ids) != len(lengths) or (lengths < 0).any() or int(lengths.sum()) != len(tokens) \
            or (len(tokens) and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size)):
        return {}
    ends = np.cumsum(lengths)
    return {str(pid): tuple(tokens[end - n:end].tolist()) for pid, n, end in zip(ids, lengths, ends)}


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

