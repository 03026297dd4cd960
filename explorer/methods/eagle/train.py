"""The feature-head trainer (EAGLE, Li et al. 2024, section 4.2), on the CPU.

Data: the target's own answers to the prompt bank (``train.data.corpus``: a greedy pass, then sampled
passes until ``tokens``), packed into windows (``train.features.pack``), and the frozen target's final
normed state f_j at every position with its top-K next-token distribution, computed once and cached
(``train.features.features``; the last layer's output, normed here).

Loss (section 4.2): a feature regression, smooth L1 between the head's f̂_{j+1} and the target's f_{j+1},
plus a token term — here the KL from the target's top-K distribution to the head's (over the V' rows it
scores) instead of the paper's cross-entropy to the target's p (the same optimum; top-K keeps the
teacher a few hundred MB) — weighted ``w_feature`` and ``w_token``. The token term runs through V' rows
of the LM head, most of a step's arithmetic on a CPU, so it is computed on a share of the positions
(``token_share``, drawn afresh each step); the regression on all of them.

Training-time test (``unroll`` = K > 1): the paper trains on true features only and adds noise so that the
head tolerates its own errors; here the head is also trained as it drafts. Step 1 reads the true f_j;
step s reads step s − 1's prediction at the position before, f̂_j, and attends over what decoding would
have in its cache at that moment: the keys of step 1 (true features) up to the round's first position
and, after it, the keys its own chain wrote at steps 2 … s (``chain_mask``). One forward per step over
whole windows, the keys of all steps in one cache, so the K steps of every position train in K passes.

Held-out measure (``heldout_acceptance``): greedy acceptance by draft position on held-out greedy answers,
teacher-forced exactly as decoding runs the head: from every answer position, step s is accepted if it
and steps 1 … s − 1 give the target's argmax (the conditional share per s: α_s).

Shape legend: B windows, W window length, H hidden size, K teacher entries, P loss positions, V' scored
rows, S steps.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from ...engine.forward import decoder_parts
from ...errors import ExplorerError
from ...models import LoadedModel
from ...progress import print_progress
from ...train import checkpoint
from ...train.loop import fit
from ...train.data import CORPUS_MODES, load_prompt_bank
from ...train.distill import chunks, draft_vocab, head_rows, kl_topk, remap, step_windows
from ...train.features import Features, Windows
from ...train.split import train_and_heldout
from .head import MAX_LAYERS, FeatureHead, new_head, save_head

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class HeadTrainConfig:
    """One feature-head training run; ``data_seed`` (the self-generated corpus) is apart from ``seed``."""

    layers: int = 1  # decoder layers in the head
    vocab: int | None = 16384  # V': the rows of the LM head it scores; None = all
    tokens: int = 1_500_000  # answer tokens of training data
    steps: int = 3000
    unroll: int = 3  # K: training-time test steps (1 = the paper's teacher-forced features only)
    batch: int = 4  # windows per step
    window: int = 512
    top_k: int = 64
    lr: float = 1e-3
    warmup: float = 0.03
    w_feature: float = 1.0
    w_token: float = 1.0
    token_share: float = 0.25  # share of the positions (drawn afresh each step) whose token term is computed
    seed: int = 0
    mode: str = "greedy+sample"
    max_new_tokens: int = 256
    gen_batch_size: int = 48
    data_seed: int = 0
    eval_steps: int = 6  # draft positions measured on held-out answers
    init: str = ""  # the digest of a trained head this run continues from (``--init``); "" = a fresh head

    def __post_init__(self):
        checkpoint.check_config([
            (1 <= self.layers <= MAX_LAYERS, f"--layers must be 1 to {MAX_LAYERS}"),
            (self.vocab is None or self.vocab >= 2, "--vocab must be at least 2 (or left out: the whole vocabulary)"),
            (self.tokens >= 1 and self.steps >= 1, "--tokens and --steps must be at least 1"),
            (1 <= self.unroll <= 8 and 1 <= self.eval_steps <= 16, "--unroll must be 1 to 8, eval_steps 1 to 16"),
            (self.batch >= 1 and self.window >= 8 and self.top_k >= 1, "batch >= 1, window >= 8, top_k >= 1"),
            (self.lr > 0 and 0 <= self.warmup < 1, "lr must be > 0 and warmup in [0, 1)"),
            (self.w_feature >= 0 and self.w_token >= 0 and self.w_feature + self.w_token > 0,
             "the loss weights must be >= 0 and not both 0"),
            (0 < self.token_share <= 1, "--token-share must be in (0, 1]"),
            (self.mode in CORPUS_MODES, f"unknown mode {self.mode!r}: use one of {', '.join(CORPUS_MODES)}"),
        ])


@dataclass(frozen=True, eq=False)
class HeadTrainResult:
    head: FeatureHead
    losses: tuple[float, ...]  # per step
    data_tokens: int
    heldout_tokens: int
    heldout_acceptance: tuple[float, ...]  # α_s: accepted ÷ reached at draft position s (greedy, held out)
    untrained_acceptance: tuple[float, ...]  # of the head the run started from (a fresh one, or ``init``'s)
    vocab_coverage: float  # share of held-out answer tokens inside the head's V' rows
    train_seconds: float
    steps_per_s: float


def train_feature_head(target: LoadedModel, config: HeadTrainConfig, prompts: list[dict] | None = None,
                       progress: Progress | None = None, precompute_layers: tuple[int, ...] = (),
                       init: FeatureHead | None = None) -> HeadTrainResult:
    """Train a feature head on the target's answers to ``prompts`` (default: the bank). ``precompute_layers``:
    other layers' states the same frozen pass should cache (the early-exit trainer reads them). ``init``: a
    trained head to go on training (its layers and vocabulary must be the config's; ``config.init`` names it)
    with a fresh optimizer and schedule: training longer, across sessions, without its checkpoint."""
    progress = progress or print_progress
    base = decoder_parts(target.model)
    last = len(base.layers)
    prompts = load_prompt_bank() if prompts is None else prompts
    data = train_and_heldout(target, prompts, config, (last,), "acceptance", progress, precompute_layers)
    train_windows, heldout_windows, heldout_feats = data.train_windows, data.heldout_windows, data.heldout_feats

    vocab = draft_vocab(data.train, config.vocab, target.vocab_size, target.eos_token_ids)
    head = new_head(target.model, config.layers, vocab, config.seed) if init is None else _continued(init, vocab, config)
    untrained = heldout_acceptance(target, head, heldout_windows, heldout_feats, config.eval_steps)
    losses, seconds = _fit(target, head, train_windows, data.train_feats, config, progress)
    trained = heldout_acceptance(target, head, heldout_windows, heldout_feats, config.eval_steps)
    coverage = _coverage(vocab, data.heldout)
    progress(1, 1, f"[feature-head] held-out acceptance by draft position {_percent(trained)} "
                   f"({'before this run' if init is not None else 'untrained'} {_percent(untrained)}) on {heldout_windows.answer_tokens} tokens; "
                   f"V' covers {coverage:.1%} of them")
    head.eval().requires_grad_(False)
    return HeadTrainResult(head, tuple(losses), train_windows.answer_tokens, heldout_windows.answer_tokens,
                           tuple(trained), tuple(untrained), coverage, seconds,
                           config.steps / seconds if seconds else float("inf"))


def _continued(init: FeatureHead, vocab: torch.Tensor | None, config: HeadTrainConfig) -> FeatureHead:
    """``init`` as a float32 head to train on, when it is the head ``config`` describes."""
    same_vocab = (init.vocab is None and vocab is None) or (
        init.vocab is not None and vocab is not None and torch.equal(init.vocab.cpu(), vocab.cpu()))
    if len(init.layers) != config.layers or not same_vocab:
        raise ExplorerError(f"--init: that head has {len(init.layers)} layer(s) and "
                            f"{'all' if init.vocab is None else init.vocab.numel()} rows; this run trains "
                            f"{config.layers} and {'all' if vocab is None else vocab.numel()} (--layers, --vocab and the "
                            "data must be the head's)")
    head = copy.deepcopy(init).float()
    head.vocab = vocab
    return head


def head_digest(path: Path) -> str:
    """What names a head an ``--init`` run continues from (its weights file's bytes)."""
    return hashlib.sha1(Path(path).read_bytes()).hexdigest()[:12]


def write_artifact(target: LoadedModel, config: HeadTrainConfig, result: HeadTrainResult, folder: Path,
                   command: str, init: FeatureHead | None = None) -> Path:
    """``save_head`` with the manifest: what was trained, on what, and how well it drafts held out. A run
    that went on from ``init`` counts that head's steps too and keeps its history: what each run bought."""
    tail = result.losses[-min(20, len(result.losses)):]
    before = dict(init.manifest) if init is not None else {}
    history = list(before.get("history") or ([{k: before.get(k) for k in ("steps", "train_seconds", "heldout_acceptance")}]
                                             if before else []))
    this_run = {"steps": config.steps, "train_seconds": round(result.train_seconds, 1),
                "heldout_acceptance": [round(a, 4) for a in result.heldout_acceptance]}
    manifest = {
        "model": target.name, "data_tokens": result.data_tokens, "mode": config.mode,
        "steps": int(before.get("steps", 0)) + config.steps,
        "seed": config.seed, "final_loss": round(sum(tail) / len(tail), 5),
        "heldout_acceptance": [round(a, 4) for a in result.heldout_acceptance],
        "untrained_acceptance": before.get("untrained_acceptance") or [round(a, 4) for a in result.untrained_acceptance],
        "history": history + [this_run],
        "heldout_tokens": result.heldout_tokens, "vocab_coverage": round(result.vocab_coverage, 4),
        "train_seconds": round(float(before.get("train_seconds", 0.0)) + result.train_seconds, 1),
        "steps_per_s": round(result.steps_per_s, 3),
        "config": asdict(config), "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command,
    }
    return save_head(result.head, target.model, Path(folder), manifest)


# -- the unrolled head: K draft steps over whole windows ---------------------------------------------------


def chain_mask(segment: torch.Tensor, step: int, dtype: torch.dtype) -> torch.Tensor:
    """Additive (B, 1, W, step·W) mask of draft step ``step`` (1-based) against the keys of steps 1 … step.

    Step s at position i belongs to the round whose first step ran at i − s + 1. Decoding's cache then
    holds step 1's keys (true features) for positions ≤ i − s + 1 and, for s' = 2 … s, the key the round's
    own step s' wrote at position i − s + s'. Within the query's sample only."""
    b, width = segment.shape
    i = torch.arange(width)[:, None]
    j = torch.arange(width)[None, :]
    same = segment[:, :, None] == segment[:, None, :]  # (B, W, W)
    blocks = [same & (j <= i - step + 1)]
    blocks += [same & (j == i - step + s) for s in range(2, step + 1)]
    allowed = torch.cat(blocks, dim=-1)  # (B, W, step·W)
    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    return mask[:, None]


def unrolled(head: FeatureHead, base, feats: torch.Tensor, windows: Windows, rows, steps: int) -> list[torch.Tensor]:
    """The head's outputs f̂ (B, W, H) at draft steps 1 … ``steps`` over windows ``rows``: step 1 from the
    true features ``feats`` (B, W, H), step s from step s − 1's output one position back."""
    ids, segment = windows.ids[rows], windows.segment[rows]
    position = windows.position[rows]
    following = base.embed_tokens(F.pad(ids[:, 1:], (0, 1))).detach()  # (B, W, H): e(x_{i+1})
    rotary = base.rotary_emb(feats, position_ids=position)
    cache = DynamicCache()
    outs, features_in = [], feats
    for step in range(1, steps + 1):
        mask = chain_mask(segment, step, feats.dtype)
        h = head.inputs(following, features_in)
        for layer in head.layers:
            h = layer(h, attention_mask=mask, position_embeddings=rotary, position_ids=position,
                      past_key_values=cache, use_cache=True)
        out = head.norm(h)  # (B, W, H): f̂_{i+1}
        outs.append(out)
        features_in = torch.cat([feats[:, :1], out[:, :-1]], dim=1)  # position i reads f̂_i from i − 1
    return outs


def step_positions(windows: Windows, rows, step: int) -> torch.Tensor:
    """(B, W) where draft step ``step`` at position i is one decoding makes: it predicts an answer token
    (x_{i+2}) and its round starts at an answer position or the prompt's last (i − s + 2 in the loss)."""
    loss, segment = windows.loss[rows], windows.segment[rows]
    width = loss.shape[1]
    i = torch.arange(width)
    target_at, start_at = i + 1, i - step + 2
    ok = (target_at < width) & (start_at >= 0)
    t, r = target_at.clamp(max=width - 1), start_at.clamp(0, width - 1)
    return ok & loss[:, t] & loss[:, r] & (segment[:, t] == segment[:, r])


def _fit(target, head: FeatureHead, windows: Windows, feats: Features, config: HeadTrainConfig,
         progress) -> tuple[list[float], float]:
    """AdamW on FC, the layers and the norm; resumes from the run's checkpoint in the cache."""
    base = decoder_parts(target.model)
    last = len(base.layers)
    head.train().requires_grad_(True)
    params = list(head.parameters())
    checkpoint_file = checkpoint.run_path("feature-head-runs", target.model, config, windows=windows.digest(),
                                          vocab=head.vocab.tolist() if head.vocab is not None else None)
    weight = head_rows(target.model, head.vocab)  # (V', H)
    rows_of = remap(head.vocab, target.vocab_size)
    count = windows.ids.shape[0]

    def loss_at(step: int) -> torch.Tensor:
        rows = step_windows(step, count, config.batch, config.seed)
        true = base.norm(feats.hidden[last][rows].float())  # (B, W, H): f_j
        following = F.pad(true[:, 1:], (0, 0, 0, 1))  # (B, W, H): f_{j+1}, what step outputs at j predict
        top_ids = F.pad(feats.top_ids[rows][:, 1:], (0, 0, 0, 1))  # (B, W, K): the teacher at j + 1
        top_logp = F.pad(feats.top_logp[rows][:, 1:], (0, 0, 0, 1))
        loss = torch.zeros(())
        draw = torch.Generator().manual_seed(config.seed * 100_003 + step)
        for s, out in enumerate(unrolled(head, base, true, windows, rows, config.unroll), start=1):
            sel = step_positions(windows, rows, s)  # (B, W)
            if not sel.any():
                continue
            predicted = out[sel]  # (P, H)
            regression = F.smooth_l1_loss(predicted, following[sel])
            # the token term through the V' rows is most of a step's arithmetic: a fresh share of positions
            some = torch.rand(predicted.shape[0], generator=draw) < config.token_share  # (P,)
            some[0] = True
            token = kl_topk(torch.log_softmax(predicted[some] @ weight.T, dim=-1), top_ids[sel][some],
                            top_logp[sel][some], rows_of)
            loss = loss + (config.w_feature * regression + config.w_token * token) / config.unroll
        return loss

    trained = fit(params, loss_at, steps=config.steps, lr=config.lr, warmup=config.warmup,
                  checkpoint_file=checkpoint_file, restore=lambda state: head.load_state_dict(state["head"]),
                  tensors=lambda: {"head": head.state_dict()}, progress=progress, label="feature-head")
    head.eval()
    return trained


def heldout_acceptance(target, head: FeatureHead, windows: Windows, feats: Features, steps: int) -> list[float]:
    """α_s for s = 1 … ``steps``: of the rounds whose drafts 1 … s − 1 were all the target's argmax, the share
    whose draft s is too (greedy, teacher-forced as decoding runs the head; see the module docstring)."""
    base = decoder_parts(target.model)
    last = len(base.layers)
    weight = head_rows(target.model, head.vocab)
    reached, accepted = [0] * steps, [0] * steps
    with torch.no_grad():
        for rows in chunks(windows.ids.shape[0], 8):
            true = base.norm(feats.hidden[last][rows].float())
            teacher = F.pad(feats.top_ids[rows][:, 1:, 0], (0, 1))  # (B, W): the target's argmax at j + 1
            alive = None  # (B, W) by round start: every draft so far accepted
            for s, out in enumerate(unrolled(head, base, true, windows, rows, steps), start=1):
                pick = (out @ weight.T).argmax(-1)  # (B, W)
                pick = head.vocab[pick] if head.vocab is not None else pick
                sel = step_positions(windows, rows, s)
                hit, there = _by_round(((pick == teacher) & sel), s), _by_round(sel, s)
                alive = there if alive is None else alive & there
                reached[s - 1] += int(alive.sum())
                alive = alive & hit
                accepted[s - 1] += int(alive.sum())
    return [a / r if r else 0.0 for a, r in zip(accepted, reached)]


def _by_round(at_position: torch.Tensor, step: int) -> torch.Tensor:
    """A (B, W) flag of draft step ``step`` by position, re-indexed by its round's start (r = i − s + 1)."""
    shift = step - 1
    out = torch.zeros_like(at_position)
    out[:, : at_position.shape[1] - shift] = at_position[:, shift:]
    return out


def _coverage(vocab: torch.Tensor | None, samples) -> float:
    if vocab is None:
        return 1.0
    inside = set(vocab.tolist())
    tokens = [t for s in samples for t in s.answer_ids]
    return sum(t in inside for t in tokens) / max(len(tokens), 1)


def _percent(values) -> str:
    return " / ".join(f"{v:.0%}" for v in values)
