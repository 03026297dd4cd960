"""Trainer for calibrated TS's θ_M predictor (EESD eq. 5, ``theta_predictor``), one per trained exit.

Data. The exit layer has learnt the bank's training answers by heart (its agreement there is far above
held-out: a predictor fitted on them expects 33 % of draft steps to be accepted where 4.5 % are), so θ_M
learns from answers the exit never saw: fresh *sampled* answers (seed ``DATA_SEED``, which no exit run
uses) to a spread of the train prompts (every 4th). It is measured on the held-out prompts' greedy answers,
where teacher forcing is exact: a draft step is reached with the target's own tokens as its prefix
whenever the round's earlier drafts were accepted, the only case where its label can be 1.

One frozen pass per answer gives, per position p, the target's final state and greedy next token, the exit's
state and greedy next token (``agree[p]``: the two match). Draft step i of a round whose step i reads
position p gives one example:

    features  step i, H^(T) at p − i (the position that produced the round's last committed token), H^(D) at p
    label     agree[p − i + 1] ∧ … ∧ agree[p]   (token i is accepted: it and the round's earlier drafts match)

for every answer position and i = 1..10. The predictor (11·d + 1 parameters) is fitted by full-batch AdamW
on the binary cross-entropy and compared on the held-out examples with the constant predictor at the
training base rate: log-loss, Brier score and ROC AUC.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from ...engine.forward import decoder_parts
from ...engine.forward import causal_mask
from ...errors import ExplorerError
from ...models import LoadedModel
from ...train.data import Sample, self_generated
from .exits import ExitHead
from .theta_predictor import MAX_STEP, ThetaPredictor, save_predictor

Progress = Callable[[int, int, str], None]
DATA_SEED = 1000  # the exit trainer samples with seeds 0, 1, 2, … (one per pass over the bank)


def round_examples(target: LoadedModel, heads: list[ExitHead], samples: list[Sample],
                   progress: Progress) -> dict[int, dict[str, torch.Tensor]]:
    """Per exit N: ``step`` (P,), ``h_target`` (P, H), ``h_draft`` (P, H), ``label`` (P,) as described above."""
    base = decoder_parts(target.model)
    lm_head = target.model.get_output_embeddings()
    parts: dict[int, dict[str, list[torch.Tensor]]] = {h.n_layers: {"step": [], "h_target": [], "h_draft": [],
                                                                    "label": []} for h in heads}
    started = time.perf_counter()
    for done, sample in enumerate(samples, 1):
        ids = torch.tensor([sample.prompt_ids + sample.answer_ids], device=target.device)  # (1, T)
        first = len(sample.prompt_ids) - 1  # the first position that predicts an answer token
        with torch.inference_mode():
            out = target.model(ids, output_hidden_states=True)
            top = out.hidden_states[-1][0]  # (T, H): after the final norm (what the LM head reads)
            target_next = out.logits[0].argmax(-1)  # (T,)
            for head in heads:
                x = _exit_states(base, head, out.hidden_states[head.n_layers])  # (T, H)
                rows = lm_head.weight if head.vocab is None else lm_head.weight[head.vocab]
                pick = (x @ rows.T).argmax(-1)
                draft_next = pick if head.vocab is None else head.vocab[pick]
                agree = (draft_next == target_next)[:-1]  # positions 0..T-2 predict an existing token
                _add_examples(parts[head.n_layers], top, x, agree, first)
        if done % 8 == 0 or done == len(samples):
            rate = done / (time.perf_counter() - started)
            progress(done, len(samples), f"[theta] frozen pass {done}/{len(samples)} answers · {rate:.1f} answers/s")
    return {n: {k: torch.cat(v) for k, v in p.items()} for n, p in parts.items()}


def _exit_states(base, head: ExitHead, hidden: torch.Tensor) -> torch.Tensor:
    """The exit head's normed states over a whole sequence: (1, T, H) layer-N states in, (T, H) out."""
    t = hidden.shape[1]
    position = torch.arange(t, device=hidden.device)[None]
    h = hidden
    if head.layers:
        rotary = base.rotary_emb(h, position_ids=position)
        for layer in head.layers:
            h = layer(h, attention_mask=causal_mask(0, t, h.dtype, h.device), position_embeddings=rotary,
                      position_ids=position)
    return head.norm(h)[0]


def _add_examples(out: dict[str, list], top: torch.Tensor, x: torch.Tensor, agree: torch.Tensor, first: int) -> None:
    last = agree.shape[0] - 1  # the last position with a label
    for i in range(1, MAX_STEP + 1):
        if first + i - 1 > last:  # answers shorter than i drafts
            break
        p = torch.arange(first + i - 1, last + 1, device=agree.device)  # the round's first draft reads p-i+1 >= first
        run = torch.stack([agree[p - j] for j in range(i)]).all(0)  # drafts 1..i of the round all match
        out["step"].append(torch.full((p.numel(),), i, dtype=torch.long))
        out["h_target"].append(top[p - i].float().cpu())
        out["h_draft"].append(x[p].float().cpu())
        out["label"].append(run.float().cpu())


def fit(examples: dict[str, torch.Tensor], steps: int = 400, lr: float = 1e-3, weight_decay: float = 1e-2,
        seed: int = 0) -> tuple[ThetaPredictor, list[float]]:
    """Full-batch AdamW on the binary cross-entropy; the bias starts at the base rate's logit."""
    torch.manual_seed(seed)
    hidden = examples["h_target"].shape[1]
    rate = examples["label"].mean().clamp(1e-4, 1 - 1e-4)
    u = torch.zeros(MAX_STEP, hidden, requires_grad=True)
    v = torch.zeros(hidden, requires_grad=True)
    b = torch.logit(rate).clone().requires_grad_(True)
    optimizer = torch.optim.AdamW([u, v, b], lr=lr, weight_decay=weight_decay)
    losses = []
    with torch.enable_grad():
        for _ in range(steps):
            logit = ThetaPredictor(u, v, b).logit(examples["step"], examples["h_target"], examples["h_draft"])
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, examples["label"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    return ThetaPredictor(u.detach(), v.detach(), b.detach()), losses


def evaluate(predictor: ThetaPredictor, examples: dict[str, torch.Tensor], base_rate: float) -> dict:
    """Log-loss, Brier and ROC AUC of the predictor, and log-loss and Brier of the constant base rate."""
    with torch.no_grad():
        p = torch.sigmoid(predictor.logit(examples["step"], examples["h_target"], examples["h_draft"]))
    y = examples["label"]
    const = torch.full_like(y, base_rate)
    bce = torch.nn.functional.binary_cross_entropy
    return {"examples": int(y.numel()), "positive_rate": round(float(y.mean()), 4),
            "log_loss": round(float(bce(p, y)), 4), "log_loss_constant": round(float(bce(const, y)), 4),
            "brier": round(float(((p - y) ** 2).mean()), 4), "brier_constant": round(float(((const - y) ** 2).mean()), 4),
            "auc": round(_auc(p, y), 4)}


def _auc(score: torch.Tensor, label: torch.Tensor) -> float:
    """ROC AUC by the rank-sum (Mann-Whitney) formula; 0.5 when one class is missing."""
    pos, neg = int(label.sum()), int((1 - label).sum())
    if not pos or not neg:
        return 0.5
    ranks = torch.empty_like(score)
    ranks[score.argsort()] = torch.arange(1, score.numel() + 1, dtype=score.dtype)
    return float((ranks[label > 0.5].sum() - pos * (pos + 1) / 2) / (pos * neg))


def train_theta(target: LoadedModel, heads: list[ExitHead], prompts: list[dict], samples: int = 48,
                steps: int = 400, seed: int = 0, max_new_tokens: int = 256, out: Path | None = None,
                command: str = "", progress: Progress | None = None) -> dict[int, tuple[Path | None, dict]]:
    """Train one predictor per trained exit in ``heads`` on fresh sampled answers to ``samples`` train
    prompts; measure on the held-out greedy answers; write each beside its exit when ``out`` is given.
    Returns N -> (path, manifest)."""
    progress = progress or (lambda d, t, line: print(line, file=sys.stderr, flush=True))
    if samples < 1 or steps < 1:
        raise ExplorerError("--samples and --steps must be at least 1")
    untrained = [h.n_layers for h in heads if not h.trained]
    if untrained:
        raise ExplorerError(f"θ_M is trained on a trained exit: none ships for N = {untrained}; "
                            "train it first with `python -m explorer train early-exit --layers N`")
    train = [p for p in prompts if p.get("split", "train") == "train"]
    heldout = [p for p in prompts if p.get("split") == "heldout"]
    if not train or not heldout:
        raise ExplorerError("the prompt bank needs both train and held-out prompts")
    train_samples = self_generated(target, train[::4][:samples], "sample", max_new_tokens, DATA_SEED, 16,
                                   progress=progress)
    heldout_samples = self_generated(target, heldout, "greedy", max_new_tokens, 0, 16, progress=progress)
    fit_data = round_examples(target, heads, train_samples, progress)
    test_data = round_examples(target, heads, heldout_samples, progress)
    results = {}
    for head in heads:
        n = head.n_layers
        start = time.perf_counter()
        predictor, losses = fit(fit_data[n], steps=steps, seed=seed)
        base_rate = float(fit_data[n]["label"].mean())
        manifest = {"model": target.name, "exit": head.path.name if head.path else None,
                    "train_answers": len(train_samples), "train_data": f"sampled, seed {DATA_SEED}", "train_examples": int(fit_data[n]["label"].numel()),
                    "steps": steps, "seed": seed, "final_loss": round(losses[-1], 4),
                    "train_seconds": round(time.perf_counter() - start, 1),
                    "heldout": evaluate(predictor, test_data[n], base_rate),
                    "per_step_positive_rate": [round(float(test_data[n]["label"][test_data[n]["step"] == i].mean()), 4)
                                               for i in range(1, MAX_STEP + 1)],
                    "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "command": command}
        path = save_predictor(predictor, target.model, n, Path(out), manifest) if out is not None else None
        h = manifest["heldout"]
        progress(1, 1, f"[theta n{n}] held-out log-loss {h['log_loss']} (constant {h['log_loss_constant']}) · "
                       f"Brier {h['brier']} (constant {h['brier_constant']}) · AUC {h['auc']}")
        results[n] = (path, manifest)
    return results
