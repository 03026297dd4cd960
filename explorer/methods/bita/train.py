"""BiTA's bi-directional tuning (Lin et al. 2024, section 3.1, eq. 1): prompt and mask tokens on a frozen target.

What is learnt: P deep prompt tokens (a key and a value per layer and KV head, prefix-style, Table 3's
"bi-directional tuning") and M mask-token embeddings (``tokens``). The target's weights never change.

Data (section 3.1): the target's own *greedy* answers to the prompt bank (``train.data.self_generated``),
so that the mask tokens learn to guess what the target itself will write. For a question X and answer
Y = y_0 … y_N, a split point k is drawn at random; the context is X + y_0 … y_{k-1}, the target's own next
token is y_k, and mask j (1 … M) is trained to predict y_{k+j} — the M tokens after the target's next one,
which is how section 3.2 uses them (eq. 1 writes Y_inst^k = {y_i, i ≤ k} with labels y_{k+1} … y_{k+M};
we index the split one earlier so that the label of mask 1 is never the token the target itself predicts).

The SAR loss (eq. 1): L = −Σ_j log P(y_{k+j} | X, y_<k; θ, φ_p, φ_m), averaged over mask positions.

One sample carries many split points at once: the context's keys and values are computed once without
gradients (the target is frozen and the context never sees the prompt tokens, Figure 3), then G groups of
M mask tokens run as one input, each group attending to the prompt tokens, to its own prefix of the context
and to the earlier masks of its group (a 4D additive mask, as at decoding time). Only the mask tokens are
differentiated, through every layer into the mask embeddings and the prompt keys and values.

Optimiser (section 4.1): AdamW from N(0, 0.02), a short warm-up and a cosine decay (the paper: lr 3e-2,
batch 128, 4 epochs on 150k samples on 32 GPUs; here a few hundred samples on a CPU), run by the trainers' shared
loop (``train.loop.fit``), each sample back-propagated as it comes. Seeded: the samples and split points of step s
are a function of (seed, s), so a run interrupted and resumed from its checkpoint (every ``CHECKPOINT_EVERY``
steps, in the cache) ends where an uninterrupted one would.

Held-out acceptance (teacher-forced, on the bank's held-out prompts at fixed split points): per mask, the
share of splits where the label is the mask's top-1 (and is among its top-k); and the tokens one forward
would emit for each tree kind had the masks been attached at that split — 1 + the accepted drafts, counted
by the tree's own rule (efficient: continue only through a top-1 match, stop after a lower-rank match;
full: continue through any top-k match; chain: top-1 matches only).

Shape legend: L layers, G groups (split points) per sample, M masks, R = G·M mask rows, P prompt tokens,
C context tokens, H hidden size, V vocabulary.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch
from transformers import DynamicCache

from ...engine.forward import decoder_parts
from ...errors import ExplorerError
from ...models import LoadedModel
from ...progress import print_progress
from ...train import checkpoint
from ...train.loop import fit
from ...train.data import Sample, load_prompt_bank, self_generated
from .tokens import BitaTokens, check_counts, init_tokens, save_tokens

CHECKPOINT_EVERY = 25
MAX_CONTEXTS = 256  # answers whose context keys and values stay cached (≈ 20 MB each on the default model)
TOKEN_NAMES = ("prompt_keys", "prompt_values", "masks")  # the trained tensors, in the checkpoint
EVAL_SEED = 12345
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class BitaTrainConfig:
    """One tuning run (defaults: section 4.1's 16 prompt tokens and 3 mask tokens for models ≤ 13B)."""

    prompt_tokens: int = 16
    mask_tokens: int = 3
    steps: int = 300
    batch: int = 4  # samples per step
    groups: int = 16  # split points (mask groups) per sample
    lr: float = 1e-2
    warmup: float = 0.05
    seed: int = 0
    eval_top_k: int = 3
    max_new_tokens: int = 256  # cap of the target's answers
    gen_batch_size: int = 48
    data_seed: int = 0

    def __post_init__(self):
        check_counts(self.prompt_tokens, self.mask_tokens)
        checkpoint.check_config([
            (self.steps >= 1 and self.batch >= 1 and self.groups >= 1, "--steps, --batch and --groups must be at least 1"),
            (self.lr > 0 and 0 <= self.warmup < 1, "--lr must be > 0 (and warmup in [0, 1))"),
            (self.eval_top_k >= 1 and self.max_new_tokens >= self.mask_tokens + 2,
             "eval top-k >= 1, and answers long enough for the mask tokens"),
        ])


@dataclass(frozen=True, eq=False)
class BitaTrainResult:
    tokens: BitaTokens
    losses: tuple[float, ...]
    train_samples: int
    train_tokens: int
    heldout: dict  # {"trained": acceptance, "untrained": acceptance, "samples", "splits"}
    train_seconds: float
    steps_per_s: float


# -- the SAR forward --------------------------------------------------------------------------------


def context_kv(model: torch.nn.Module, ids: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Keys and values (1, G, C, D) of every layer for a context, without gradients (the target is frozen)."""
    cache = DynamicCache()
    device = next(model.parameters()).device
    with torch.no_grad():
        model(input_ids=torch.tensor([ids], device=device), past_key_values=cache, use_cache=True, logits_to_keep=1)
    return [(layer.keys, layer.values) for layer in cache.layers]


def sar_logits(model: torch.nn.Module, prompt_keys: torch.Tensor, prompt_values: torch.Tensor, masks: torch.Tensor,
               ctx: list[tuple[torch.Tensor, torch.Tensor]], lasts: list[int]) -> torch.Tensor:
    """Logits (G·M, V) of G mask groups, group g placed after context position ``lasts[g]``.

    Group g sees the prompt tokens, context positions 0 … lasts[g] and the earlier masks of its group;
    mask j (1-based) has position id lasts[g] + j (Figure 3)."""
    base = decoder_parts(model)
    n_masks, n_groups = masks.shape[0], len(lasts)
    n_prompt, n_ctx = prompt_keys.shape[2], ctx[0][0].shape[2]
    rows = n_groups * n_masks
    cache = DynamicCache(ddp_cache_data=[(torch.cat([pk[None], k], dim=2), torch.cat([pv[None], v], dim=2))
                                         for pk, pv, (k, v) in zip(prompt_keys, prompt_values, ctx)])
    device = masks.device
    last = torch.tensor(lasts, device=device).repeat_interleave(n_masks)  # (R,)
    slot = torch.arange(n_masks, device=device).repeat(n_groups)  # (R,) 0-based
    group = torch.arange(n_groups, device=device).repeat_interleave(n_masks)  # (R,)
    allowed = torch.zeros(rows, n_prompt + n_ctx + rows, dtype=torch.bool, device=device)  # (R, P + C + R)
    allowed[:, :n_prompt] = True
    allowed[:, n_prompt:n_prompt + n_ctx] = torch.arange(n_ctx, device=device)[None] <= last[:, None]
    same_group = group[:, None] == group[None]
    allowed[:, n_prompt + n_ctx:] = same_group & (slot[None] <= slot[:, None])
    additive = torch.zeros(allowed.shape, dtype=masks.dtype, device=device)
    additive = additive.masked_fill(~allowed, torch.finfo(masks.dtype).min)[None, None]  # (1, 1, R, P + C + R)
    position = (last + slot + 1)[None]  # (1, R)
    embeds = masks.repeat(n_groups, 1)[None]  # (1, R, H)
    out = base(inputs_embeds=embeds, attention_mask=additive, position_ids=position, past_key_values=cache,
               use_cache=True)
    return model.get_output_embeddings()(out.last_hidden_state[0])  # (R, V)


def split_points(sample: Sample, n_masks: int, n_groups: int, generator: torch.Generator | None) -> list[int]:
    """Context-last positions (indices into prompt + answer) with room for the target's token and M labels:
    random ones (without replacement) when ``generator`` is given, else evenly spread."""
    first = len(sample.prompt_ids) - 1
    stop = len(sample.prompt_ids) + len(sample.answer_ids) - n_masks - 1  # exclusive
    count = stop - first
    if count <= 0:
        return []
    if generator is None:
        picks = sorted({first + round(i * (count - 1) / max(n_groups - 1, 1)) for i in range(min(n_groups, count))})
        return picks
    return sorted((first + torch.randperm(count, generator=generator)[:n_groups]).tolist())


def labels_for(sample: Sample, lasts: list[int], n_masks: int) -> torch.Tensor:
    """(G·M,) the token mask j should predict after a context ending at ``last``: ids[last + 1 + j]."""
    ids = list(sample.prompt_ids) + list(sample.answer_ids)
    return torch.tensor([ids[last + 1 + j] for last in lasts for j in range(1, n_masks + 1)], dtype=torch.long)


def sample_kv(model, sample: Sample, n_masks: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Keys and values of the longest context any split point of the sample needs, kept in float16 (the
    run keeps those of up to ``MAX_CONTEXTS`` samples: the frozen context is computed once per sample, not
    once per epoch, while the bank's answers fit in memory)."""
    ids = list(sample.prompt_ids) + list(sample.answer_ids)
    return [(k.half(), v.half()) for k, v in context_kv(model, ids[: len(ids) - n_masks - 1])]


def sar_loss(model, tokens_params, sample: Sample, lasts: list[int], ctx) -> torch.Tensor:
    """Eq. 1 for one sample at the given split points (mean over mask rows); ``ctx`` from ``sample_kv``."""
    prompt_keys, prompt_values, masks = tokens_params
    n_masks = masks.shape[0]
    ctx = [(k.to(masks.dtype), v.to(masks.dtype)) for k, v in ctx]
    logits = sar_logits(model, prompt_keys, prompt_values, masks, ctx, lasts)  # (R, V)
    return torch.nn.functional.cross_entropy(logits.float(), labels_for(sample, lasts, n_masks).to(logits.device))


# -- held-out acceptance ----------------------------------------------------------------------------


def acceptance(model, tokens: BitaTokens, samples: list[Sample], n_groups: int, top_k: int) -> dict:
    """Teacher-forced acceptance at evenly spread split points of each sample (see the module docstring)."""
    m = tokens.n_masks
    top1 = torch.zeros(m)
    topk = torch.zeros(m)
    accepted = {"efficient": 0.0, "full": 0.0, "chain": 0.0}
    splits = 0
    with torch.no_grad():
        for sample in samples:
            lasts = split_points(sample, m, n_groups, None)
            if not lasts:
                continue
            ids = list(sample.prompt_ids) + list(sample.answer_ids)
            ctx = context_kv(model, ids[: max(lasts) + 1])
            logits = sar_logits(model, tokens.prompt_keys, tokens.prompt_values, tokens.masks, ctx, lasts)
            top = torch.topk(logits.float(), top_k, dim=-1).indices.view(len(lasts), m, top_k).cpu()  # (G, M, k)
            labels = labels_for(sample, lasts, m).view(len(lasts), m)  # (G, M)
            hit = top == labels[..., None]  # (G, M, k)
            top1 += hit[..., 0].float().sum(0)
            topk += hit.any(-1).float().sum(0)
            for g in range(len(lasts)):
                accepted["efficient"] += _tree_accepted(hit[g], expand_all=False)
                accepted["full"] += _tree_accepted(hit[g], expand_all=True)
                accepted["chain"] += _tree_accepted(hit[g, :, :1], expand_all=False)
            splits += len(lasts)
    n = max(splits, 1)
    return {"top1": [round(float(x) / n, 4) for x in top1], f"top{top_k}": [round(float(x) / n, 4) for x in topk],
            "tokens_per_forward": {k: round(1 + v / n, 4) for k, v in accepted.items()}, "splits": splits}


def _tree_accepted(hit: torch.Tensor, expand_all: bool) -> int:
    """Drafts one forward accepts, given per mask which of its top-k ranks hit the label (M, k)."""
    count = 0
    for row in hit.tolist():
        if row[0] or (expand_all and any(row)):
            count += 1
            continue
        if any(row):  # a lower-rank candidate: a leaf of the efficient tree
            count += 1
        break
    return count


# -- training ---------------------------------------------------------------------------------------


def train_bita(target: LoadedModel, config: BitaTrainConfig, prompts: list[dict] | None = None,
               progress: Progress | None = None) -> BitaTrainResult:
    """Tune prompt and mask tokens on the target's greedy answers to the bank's training prompts."""
    progress = progress or print_progress
    decoder_parts(target.model)  # refuses a model without a Llama-style decoder before any work
    prompts = load_prompt_bank() if prompts is None else prompts
    train_prompts = [p for p in prompts if p.get("split", "train") == "train"]
    heldout_prompts = [p for p in prompts if p.get("split") == "heldout"]
    if not train_prompts or not heldout_prompts:
        raise ExplorerError("the prompt bank needs both train and held-out prompts")
    gen = dict(max_new_tokens=config.max_new_tokens, seed=config.data_seed, batch_size=config.gen_batch_size,
               progress=progress)
    heldout = _usable(self_generated(target, heldout_prompts, "greedy", **gen), config)
    train = _usable(self_generated(target, train_prompts, "greedy", **gen), config)
    if not train:
        raise ExplorerError("no training answer is long enough for the mask tokens")

    init = init_tokens(target.model, config.prompt_tokens, config.mask_tokens, config.seed)
    params = [torch.nn.Parameter(t.detach().float().clone()) for t in (init.prompt_keys, init.prompt_values, init.masks)]
    data = hashlib.sha1(json.dumps([[s.prompt_id, len(s.answer_ids)] for s in train]).encode()).hexdigest()
    model_dtype = next(target.model.parameters()).dtype
    contexts: dict[int, list] = {}
    ran = []  # the steps this session ran: its pace

    def loss_at(step: int):
        """Eq. 1 over the step's samples, one sample at a time (each runs through the whole frozen target, so the
        loop back-propagates each as it comes: a step holds one sample's graph)."""
        ran.append(step)
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
        for index in _step_samples(step, len(train), config):
            sample = train[index]
            lasts = split_points(sample, config.mask_tokens, config.groups, generator)
            if index not in contexts:
                if len(contexts) >= MAX_CONTEXTS:  # the oldest goes: 3 000 answers' KV would not fit in memory
                    contexts.pop(next(iter(contexts)))
                contexts[index] = sample_kv(target.model, sample, config.mask_tokens)
            yield sar_loss(target.model, [p.to(model_dtype) for p in params], sample, lasts, contexts[index]) / config.batch

    start = time.perf_counter()
    losses, seconds = fit(params, loss_at, steps=config.steps, lr=config.lr, warmup=config.warmup, lr_floor=0.05,
                          checkpoint_file=checkpoint.run_path("bita-runs", target.model, config, data=data),
                          tensors=lambda: dict(zip(TOKEN_NAMES, (p.detach() for p in params))),
                          restore=lambda state: _restore(params, state), progress=progress, label="bita",
                          checkpoint_every=CHECKPOINT_EVERY, report_every=5)
    steps_per_s = len(ran) / (time.perf_counter() - start) if ran else 0.0
    contexts.clear()
    trained = BitaTokens(*(p.detach().to(model_dtype) for p in params))
    progress(config.steps, config.steps, "[bita] measuring held-out acceptance (trained and untrained)")
    result_heldout = {
        "samples": len(heldout),
        "trained": acceptance(target.model, trained, heldout, config.groups, config.eval_top_k),
        "untrained": acceptance(target.model, init, heldout, config.groups, config.eval_top_k),
        "train_subset": acceptance(target.model, trained, train[: len(heldout)], config.groups, config.eval_top_k),
    }
    return BitaTrainResult(trained, tuple(losses), len(train), sum(len(s.answer_ids) for s in train),
                           result_heldout, seconds, steps_per_s)


def write_artifact(target: LoadedModel, config: BitaTrainConfig, result: BitaTrainResult, path: Path,
                   command: str) -> Path:
    """``save_tokens`` with the manifest: what was trained, on what, and how well it accepts."""
    tail = result.losses[-min(20, len(result.losses)):]
    manifest = {
        "model": target.name, "steps": config.steps, "seed": config.seed,
        "final_loss": round(sum(tail) / len(tail), 4), "first_loss": round(result.losses[0], 4),
        "loss_every_10_steps": [round(x, 3) for x in result.losses[::10]],
        "train_samples": result.train_samples, "train_answer_tokens": result.train_tokens,
        "heldout": result.heldout, "train_seconds": round(result.train_seconds, 1),
        "steps_per_s": round(result.steps_per_s, 4), "torch_threads": torch.get_num_threads(),
        "device": str(target.device), "config": asdict(config),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "command": command,
    }
    return save_tokens(result.tokens, target.model, path, manifest)


def _usable(samples: list[Sample], config: BitaTrainConfig) -> list[Sample]:
    return [s for s in samples if len(s.answer_ids) >= config.mask_tokens + 2]


def _step_samples(step: int, count: int, config: BitaTrainConfig) -> list[int]:
    """Step s takes the next ``batch`` samples of a seeded permutation per epoch: a function of (seed, s)."""
    index = [step * config.batch + j for j in range(config.batch)]
    perms = {e: torch.randperm(count, generator=torch.Generator().manual_seed(config.seed * 100_003 + e))
             for e in {i // count for i in index}}
    return [int(perms[i // count][i % count]) for i in index]


def _restore(params, state: dict) -> None:
    with torch.no_grad():
        for p, name in zip(params, TOKEN_NAMES):
            p.copy_(state[name])

