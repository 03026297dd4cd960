"""The data a distillation trainer reads, train and held out, in one call: the target's answers to the bank's
train prompts (``config.tokens`` of them, by ``config.mode``) and its greedy answers to the held-out prompts,
packed into windows, with the frozen features of the layers the trainer reads (the teacher's top-``top_k`` on the
train windows, its argmax on the held-out ones). The exit layer's and the feature head's trainers both start here.

``config`` is a trainer's config: it has ``tokens``, ``mode``, ``max_new_tokens``, ``data_seed``,
``gen_batch_size``, ``window`` and ``top_k``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import ExplorerError
from .data import Sample, corpus, self_generated
from .features import Features, Windows, features, pack


@dataclass(frozen=True, eq=False)
class Split:
    train: list[Sample]
    heldout: list[Sample]
    train_windows: Windows
    heldout_windows: Windows
    train_feats: Features
    heldout_feats: Features


def train_and_heldout(target, prompts: list[dict], config, layers: tuple[int, ...], measured: str,
                      progress: Callable[[int, int, str], None], precompute_layers: tuple[int, ...] = ()) -> Split:
    """The split of ``prompts`` (a prompt without a ``split`` trains); ``measured`` says what the held-out answers
    measure, for the refusal of a bank without any."""
    train = corpus(target, [p for p in prompts if p.get("split", "train") == "train"], config.tokens, config.mode,
                   config.max_new_tokens, config.data_seed, config.gen_batch_size, progress)
    heldout_prompts = [p for p in prompts if p.get("split") == "heldout"]
    if not heldout_prompts:
        raise ExplorerError(f"the prompt bank has no held-out prompts to measure {measured} on")
    heldout = self_generated(target, heldout_prompts, "greedy", config.max_new_tokens, config.data_seed,
                             config.gen_batch_size, progress=progress)
    pad = min(target.eos_token_ids, default=0)
    train_windows, heldout_windows = pack(train, config.window, pad), pack(heldout, config.window, pad)
    return Split(train, heldout, train_windows, heldout_windows,
                 features(target, train_windows, layers, config.top_k, progress, precompute_layers),
                 features(target, heldout_windows, layers, 1, progress, precompute_layers))
