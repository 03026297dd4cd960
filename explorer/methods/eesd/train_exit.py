"""The EESD exit-layer trainer (sections 3.1-3.2, Appendix C).

The draft is the target's first N layers (frozen), one transformer layer (``exit_layers``: or more) +
RMSNorm on top (``new_exit``: initialised from the target's last layers and final norm, section 3.1), and the target's LM head ``W``
(eq. 1), which here stays shared and frozen so that the artifact holds only the layer. It learns from the
target's own answers to the prompt bank (self-distillation, section 3.2; hybrid greedy/sampled generation
after Liu et al. 2023) with either

    ``kl``  KL(p_target || q_exit) over the target's top-K next tokens (renormalised), or
    ``ce``  cross-entropy to the tokens the target wrote (the paper's loss, section 3.2),

by AdamW at lr 1e-3 (Appendix C), with a short warm-up and a cosine decay. Optionally the draft scores only
V' head rows (``vocab``): the V' most frequent answer tokens of the corpus plus EOS. Teacher entries outside
them are dropped from the KL, and positions whose token is outside them from the CE.

Training runs on cached features (``features``): only the exit layer and the head are computed per step.
A checkpoint in the cache every ``train.loop.CHECKPOINT_EVERY`` steps makes an interrupted run resume where it was,
with the same result: the windows of step s are a function of (seed, s).

Agreement is measured teacher-forced on held-out greedy answers: the share of answer positions where the
exit's argmax equals the target's argmax, for the trained exit and for the untrained one (the target's own
norm and head right after layer N).

Shape legend: B windows, W window length, H hidden size, K teacher entries, P loss positions, V' draft vocabulary.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from ...engine.forward import decoder_parts
from ...models import LoadedModel
from ...progress import print_progress
from ...train import checkpoint
from ...train.loop import fit
from ...train.data import CORPUS_MODES, load_prompt_bank
from ...train.distill import chunks, draft_vocab, head_rows, kl_topk, remap, step_windows
from ...train.features import Features, Windows, attention_mask
from ...train.split import train_and_heldout
from .exits import MAX_EXIT_LAYERS, ExitHead, new_exit, save_exit, untrained_exit

LOSSES = ("kl", "ce")

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class TrainConfig:
    """One exit-layer training run; ``data_seed`` (the self-generated corpus) is apart from ``seed``."""

    n_layers: int
    tokens: int = 60_000  # answer tokens of training data
    exit_layers: int = 1  # decoder layers of the exit itself (EESD: one)
    steps: int = 600
    seed: int = 0
    vocab: int | None = None  # V': score only the V' most frequent tokens; None = the whole vocabulary
    loss: str = "kl"
    lr: float = 1e-3
    batch: int = 2  # windows per step (about 1000 tokens on the default model: 3-4 answers)
    window: int = 512  # fits a whole prompt + 256-token answer, so no answer is cut
    top_k: int = 64
    warmup: float = 0.05  # share of steps with a linear warm-up
    mode: str = "hybrid"
    max_new_tokens: int = 256
    gen_batch_size: int = 48
    data_seed: int = 0

    def __post_init__(self):
        checkpoint.check_config([
            (self.n_layers >= 1, "--layers must be at least 1"),
            (1 <= self.exit_layers <= MAX_EXIT_LAYERS, f"--exit-layers must be 1 to {MAX_EXIT_LAYERS}"),
            (self.tokens >= 1 and self.steps >= 1, "--tokens and --steps must be at least 1"),
            (self.vocab is None or self.vocab >= 2, "--vocab must be at least 2 (or left out: the whole vocabulary)"),
            (self.loss in LOSSES, f"unknown loss {self.loss!r}: use one of {', '.join(LOSSES)}"),
            (self.mode in CORPUS_MODES, f"unknown mode {self.mode!r}: use one of {', '.join(CORPUS_MODES)}"),
            (self.lr > 0 and 0 <= self.warmup < 1, "lr must be > 0 and warmup in [0, 1)"),
            (self.batch >= 1 and self.window >= 8 and self.top_k >= 1, "batch >= 1, window >= 8, top_k >= 1"),
        ])


@dataclass(frozen=True, eq=False)
class TrainResult:
    head: ExitHead
    losses: tuple[float, ...]  # per step
    data_tokens: int
    heldout_tokens: int
    heldout_agreement: float
    untrained_agreement: float
    train_seconds: float
    steps_per_s: float


def train_early_exit(target: LoadedModel, config: TrainConfig, prompts: list[dict] | None = None,
                     progress: Progress | None = None, precompute_layers: tuple[int, ...] = ()) -> TrainResult:
    """Train an exit after ``config.n_layers`` layers on the target's answers to ``prompts`` (the bank).

    ``precompute_layers``: other N whose hidden states the same frozen pass should cache (for the CLI's
    several ``--layers``)."""
    progress = progress or print_progress
    untrained_exit(target.model, config.n_layers)  # refuses an impossible N before any work
    prompts = load_prompt_bank() if prompts is None else prompts
    data = train_and_heldout(target, prompts, config, (config.n_layers,), "agreement", progress, precompute_layers)
    train_windows, heldout_windows, heldout_feats = data.train_windows, data.heldout_windows, data.heldout_feats

    vocab = draft_vocab(data.train, config.vocab, target.vocab_size, target.eos_token_ids)
    head = new_exit(target.model, config.n_layers, vocab, config.exit_layers)
    losses, seconds = _fit(target, head, train_windows, data.train_feats, config, progress)
    trained = agreement(target, head, heldout_windows, heldout_feats)
    untrained = agreement(target, untrained_exit(target.model, config.n_layers), heldout_windows, heldout_feats)
    progress(1, 1, f"[early-exit n{config.n_layers}] held-out agreement {trained:.1%} "
                   f"(untrained {untrained:.1%}) on {heldout_windows.answer_tokens} tokens")
    for module in (*head.layers, head.norm):
        module.eval().requires_grad_(False)
    return TrainResult(head, tuple(losses), train_windows.answer_tokens, heldout_windows.answer_tokens,
                       trained, untrained, seconds, config.steps / seconds if seconds else float("inf"))


def write_artifact(target: LoadedModel, config: TrainConfig, result: TrainResult, folder: Path,
                   command: str) -> Path:
    """``save_exit`` with the manifest: what was trained, on what, and how well it agrees."""
    tail = result.losses[-min(20, len(result.losses)):]
    manifest = {
        "model": target.name, "data_tokens": result.data_tokens, "mode": config.mode, "steps": config.steps,
        "seed": config.seed, "loss": config.loss, "final_loss": round(sum(tail) / len(tail), 5),
        "heldout_agreement": round(result.heldout_agreement, 4),
        "untrained_agreement": round(result.untrained_agreement, 4), "heldout_tokens": result.heldout_tokens,
        "train_seconds": round(result.train_seconds, 1), "steps_per_s": round(result.steps_per_s, 3),
        "config": asdict(config), "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command,
    }
    return save_exit(result.head, target.model, Path(folder), manifest)


def agreement(target: LoadedModel, head: ExitHead, windows: Windows, feats: Features) -> float:
    """Share of loss positions where the exit's argmax is the target's argmax (teacher-forced)."""
    weight = head_rows(target.model, head.vocab)
    hits = 0
    with torch.no_grad():
        for rows in chunks(windows.ids.shape[0], 8):
            h = _exit_hidden(target, head, feats.hidden[head.n_layers][rows], windows, rows)  # (b, W, H)
            sel = windows.loss[rows]  # (b, W)
            pick = (h[sel.to(h.device)] @ weight.T).argmax(-1).cpu()  # (P,)
            pick = head.vocab.cpu()[pick] if head.vocab is not None else pick
            hits += int((pick == feats.top_ids[rows][sel][:, 0]).sum())
    return hits / max(windows.answer_tokens, 1)


def _fit(target, head: ExitHead, windows: Windows, feats: Features, config: TrainConfig,
         progress) -> tuple[list[float], float]:
    """AdamW on the exit layer and norm; resumes from the run's checkpoint in the cache.

    Returns the per-step losses and the seconds spent training (over all sessions of the run)."""
    modules = (*head.layers, head.norm)
    params = [p for m in modules for p in m.parameters()]
    for module in modules:
        module.train().requires_grad_(True)
    checkpoint_file = checkpoint.run_path("early-exit-runs", target.model, config, f"-n{config.n_layers}",
                                          windows=windows.digest(),
                                          vocab=head.vocab.tolist() if head.vocab is not None else None)
    weight = head_rows(target.model, head.vocab)
    rows_of = remap(head.vocab, target.vocab_size)
    count = windows.ids.shape[0]

    def loss_at(step: int) -> torch.Tensor:
        rows = step_windows(step, count, config.batch, config.seed)
        h = _exit_hidden(target, head, feats.hidden[config.n_layers][rows], windows, rows)  # (b, W, H)
        sel = windows.loss[rows]  # (b, W)
        logq = torch.log_softmax(h[sel.to(h.device)] @ weight.T, dim=-1)  # (P, V')
        if config.loss == "kl":
            return kl_topk(logq, feats.top_ids[rows][sel], feats.top_logp[rows][sel], rows_of)
        return _ce(logq, windows.ids[rows][:, 1:], sel, rows_of)

    return fit(params, loss_at, steps=config.steps, lr=config.lr, warmup=config.warmup,
               checkpoint_file=checkpoint_file, restore=lambda state: _restore(head, state),
               tensors=lambda: {"layers": [layer.state_dict() for layer in head.layers],
                                "norm": head.norm.state_dict()},
               progress=progress, label=f"early-exit n{config.n_layers}")


def _exit_hidden(target, head: ExitHead, hidden: torch.Tensor, windows: Windows, rows) -> torch.Tensor:
    """Eq. 1 up to the head: ``RMSNorm(Transformer^e(H^N))`` (or just the norm for an untrained exit)."""
    base = decoder_parts(target.model)
    param = next(target.model.parameters())
    h = hidden.to(param.device, param.dtype)  # (b, W, H)
    if head.layers:
        position = windows.position[rows].to(param.device)  # (b, W)
        mask = attention_mask(windows.segment[rows], param.dtype).to(param.device)  # (b, 1, W, W)
        rotary = base.rotary_emb(h, position_ids=position)
        for layer in head.layers:
            h = layer(h, attention_mask=mask, position_embeddings=rotary, position_ids=position)
    return head.norm(h)


def _ce(logq, next_ids, sel, remap) -> torch.Tensor:
    """Cross-entropy to the target's own next tokens; tokens the draft cannot score are left out."""
    nxt = torch.nn.functional.pad(next_ids, (0, 1))[sel].to(logq.device)  # (P,)
    index = remap.to(logq.device)[nxt] if remap is not None else nxt
    keep = index >= 0
    return -logq[keep].gather(-1, index[keep, None]).mean()


def _restore(head: ExitHead, state: dict) -> None:
    for layer, saved in zip(head.layers, state["layers"]):
        layer.load_state_dict(saved)
    head.norm.load_state_dict(state["norm"])
