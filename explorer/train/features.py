"""Packed training windows and the frozen target's features over them, computed once and cached.

An EESD exit layer (section 3.1, eq. 1) reads only the hidden state ``H^N`` after the target's first N
layers, which are frozen; its self-distillation target (section 3.2) is the full model's next-token
distribution. Neither changes during training, so both are computed in one pass over the corpus and kept
on disk (``H^N`` in float16; the target's distribution as its top-K ids and log-probabilities), and a
training step runs only the exit layer and the head.

Samples (prompt + answer) are packed whole into fixed-length windows, first-fit by decreasing length, with
a block-diagonal causal mask and positions that restart at each sample: every token sees exactly the
context it has when the target decodes that answer, and no sample attends to another. A sample longer
than a window is cut to the window.

Shape legend: B windows, W window length, H hidden size, K kept teacher entries, V vocabulary.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from ..engine.forward import decoder_parts
from ..artifacts import fingerprint
from ..models import LoadedModel, cache_root
from .data import Sample

FORWARD_BATCH = 2  # windows per frozen forward: a (2, W, 49152) logits block stays a few hundred MB
# windows per saved piece of a frozen pass (≈ 3 min of the default model on a 2-core CPU): an interrupted
# pass (the whole one is 75–110 min there) resumes at its first missing piece
PIECE_WINDOWS = 64


@dataclass(frozen=True, eq=False)
class Windows:
    """Samples packed into ``B`` windows of ``W`` tokens."""

    ids: torch.Tensor  # (B, W) int64 token ids; padding where segment is -1
    segment: torch.Tensor  # (B, W) int64: which sample of the window a token belongs to, -1 for padding
    position: torch.Tensor  # (B, W) int64: the token's position within its sample
    loss: torch.Tensor  # (B, W) bool: this position predicts an answer token (teacher-forced)

    @property
    def answer_tokens(self) -> int:
        return int(self.loss.sum())

    def digest(self) -> str:
        data = b"".join(t.numpy().tobytes() for t in (self.ids, self.segment, self.loss))
        return hashlib.sha1(data).hexdigest()[:16]


def pack(samples: list[Sample], window: int, pad_id: int = 0) -> Windows:
    """First-fit-decreasing packing of whole samples; the loss covers the positions from the prompt's last
    token to the answer's second-to-last token (each predicts the next answer token)."""
    pieces = [((s.prompt_ids + s.answer_ids)[:window], len(s.prompt_ids)) for s in samples]
    pieces.sort(key=lambda piece: (-len(piece[0]), piece))  # longest first; ties in a fixed order
    bins: list[list[tuple[tuple[int, ...], int]]] = []
    room: list[int] = []
    for piece in pieces:
        slot = next((i for i, r in enumerate(room) if r >= len(piece[0])), None)
        if slot is None:
            bins.append([])
            room.append(window)
            slot = len(bins) - 1
        bins[slot].append(piece)
        room[slot] -= len(piece[0])
    ids = torch.full((len(bins), window), pad_id, dtype=torch.long)  # (B, W)
    segment = torch.full((len(bins), window), -1, dtype=torch.long)  # (B, W)
    position = torch.zeros((len(bins), window), dtype=torch.long)  # (B, W)
    loss = torch.zeros((len(bins), window), dtype=torch.bool)  # (B, W)
    for b, members in enumerate(bins):
        start = 0
        for k, (tokens, prompt_len) in enumerate(members):
            end = start + len(tokens)
            ids[b, start:end] = torch.tensor(tokens)
            segment[b, start:end] = k
            position[b, start:end] = torch.arange(len(tokens))
            loss[b, start + max(prompt_len - 1, 0):end - 1] = True
            start = end
    return Windows(ids, segment, position, loss)


def attention_mask(segment: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive (B, 1, W, W) mask: causal within a sample, closed across samples; padding sees itself only
    (a fully masked row would give NaN)."""
    width = segment.shape[1]
    causal = torch.ones(width, width, dtype=torch.bool).tril()  # (W, W)
    same = (segment[:, :, None] == segment[:, None, :]) & causal  # (B, W, W)
    same |= torch.eye(width, dtype=torch.bool)
    mask = torch.zeros(same.shape, dtype=dtype).masked_fill(~same, torch.finfo(dtype).min)
    return mask[:, None]  # (B, 1, W, W)


@dataclass(frozen=True, eq=False)
class Features:
    """The frozen target over ``Windows``: hidden states after chosen layers and its top-K distribution."""

    hidden: dict[int, torch.Tensor]  # N -> (B, W, H) float16: H^N, the output of decoder layer N
    top_ids: torch.Tensor  # (B, W, K) int64: the target's K most likely next tokens, most likely first
    top_logp: torch.Tensor  # (B, W, K) float16: their log-probabilities under the full softmax


def features(target: LoadedModel, windows: Windows, layers: tuple[int, ...], top_k: int,
             progress: Callable[[int, int, str], None] | None = None, precompute: tuple[int, ...] = ()) -> Features:
    """Hidden states after each of ``layers`` and the target's top-K, from the disk cache when there.
    ``precompute``: other layers whose states the same frozen pass caches for later runs (not loaded: one
    layer's states over a million tokens take over 1 GB)."""
    from safetensors.torch import load_file, save_file

    folder = cache_root() / "features" / f"{fingerprint(target.model)}-{windows.digest()}"
    teacher_file = folder / f"teacher-k{top_k}.safetensors"
    hidden_files = {n: folder / f"hidden-n{n}.safetensors" for n in sorted({*layers, *precompute})}
    missing = [n for n, f in hidden_files.items() if not f.is_file()]
    if missing or not teacher_file.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        pieces = folder / f"pieces-k{top_k}-n{'-'.join(map(str, missing)) or 'none'}"
        hidden, top_ids, top_logp = frozen_pass(target, windows, tuple(missing), top_k, progress, pieces)
        for n in missing:
            _save(save_file, {"hidden": hidden.pop(n)}, hidden_files[n])  # each freed once written
        if not teacher_file.is_file():
            _save(save_file, {"ids": top_ids.to(torch.int32), "logp": top_logp}, teacher_file)
        del hidden, top_ids, top_logp
        shutil.rmtree(pieces, ignore_errors=True)
    teacher = load_file(str(teacher_file))
    return Features({n: load_file(str(hidden_files[n]))["hidden"] for n in sorted(set(layers))},
                    teacher["ids"].long(), teacher["logp"])


@torch.no_grad()
def frozen_pass(target: LoadedModel, windows: Windows, layers: tuple[int, ...], top_k: int,
                progress: Callable[[int, int, str], None] | None = None,
                pieces: Path | None = None) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """One pass of the whole target over the windows (no cache): ``H^N`` for each N in ``layers``, and the
    top-K ids and log-probabilities. With ``pieces`` (a folder), every ``PIECE_WINDOWS`` windows are saved
    there as they finish and a piece already there is read instead of computed: an interrupted pass resumes."""
    import time

    from safetensors.torch import load_file, save_file

    base = decoder_parts(target.model)
    head = target.model.get_output_embeddings()
    count, width = windows.ids.shape
    top_k = min(top_k, head.weight.shape[0])
    hidden = {n: torch.empty(count, width, base.config.hidden_size, dtype=torch.float16) for n in layers}
    top_ids = torch.empty(count, width, top_k, dtype=torch.long)
    top_logp = torch.empty(count, width, top_k, dtype=torch.float16)
    start, computed = time.perf_counter(), 0
    for lo in range(0, count, PIECE_WINDOWS):
        piece = slice(lo, min(lo + PIECE_WINDOWS, count))
        path = pieces / f"{lo:06d}-{piece.stop:06d}.safetensors" if pieces is not None else None
        if path is not None and path.is_file():  # done before an interruption
            saved = load_file(str(path))
            for n in layers:
                hidden[n][piece] = saved[f"hidden-n{n}"]
            top_ids[piece], top_logp[piece] = saved["ids"].long(), saved["logp"]
            continue
        def report(done: int, first: int = piece.start) -> None:
            if progress:
                rate = (computed + done - first) * width / (time.perf_counter() - start)
                progress(done, count, f"[features] {done}/{count} windows · {rate:.0f} tok/s")

        _pass_piece(target, base, head, windows, piece, hidden, top_ids, top_logp, top_k, report)
        computed += piece.stop - piece.start
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            _save(save_file, {**{f"hidden-n{n}": hidden[n][piece] for n in layers},
                              "ids": top_ids[piece].to(torch.int32), "logp": top_logp[piece]}, path)
    return hidden, top_ids, top_logp


def _pass_piece(target, base, head, windows: Windows, piece: slice, hidden: dict, top_ids: torch.Tensor,
                top_logp: torch.Tensor, top_k: int, report: Callable[[int], None]) -> None:
    """The frozen pass over the windows of ``piece``, ``FORWARD_BATCH`` at a time, into the given tensors;
    ``report(windows done)`` after each batch."""
    param = next(target.model.parameters())
    for lo in range(piece.start, piece.stop, FORWARD_BATCH):
        rows = slice(lo, min(lo + FORWARD_BATCH, piece.stop))
        ids = windows.ids[rows].to(param.device)  # (b, W)
        position = windows.position[rows].to(param.device)  # (b, W)
        mask = attention_mask(windows.segment[rows], param.dtype).to(param.device)  # (b, 1, W, W)
        h = base.embed_tokens(ids)  # (b, W, H)
        rotary = base.rotary_emb(h, position_ids=position)
        for index, layer in enumerate(base.layers, start=1):
            h = layer(h, attention_mask=mask, position_embeddings=rotary, position_ids=position)
            if index in hidden:
                hidden[index][rows] = h.to("cpu", torch.float16)
        logp = torch.log_softmax(head(base.norm(h)).float(), dim=-1)  # (b, W, V)
        values, indices = logp.topk(top_k, dim=-1)  # (b, W, K)
        top_ids[rows], top_logp[rows] = indices.cpu(), values.to("cpu", torch.float16)
        report(rows.stop)


def _save(save_file, tensors: dict, path: Path) -> None:
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # one per process: two may extract the same
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp))
    tmp.replace(path)
