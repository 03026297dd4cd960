"""One sampling warp for draft and target alike.

Leviathan et al. (section 2.3) apply the same warp — temperature, top-k, top-p — to both models'
logits, and the lossless guarantee holds for the *warped* target distribution p. Temperature 0 is an
explicit greedy branch: the warped distribution is the one-hot of the argmax, so greedy speculative
decoding is prefix matching (see ``acceptance``).

Shape legend: K positions, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..errors import ExplorerError
from ..limits import check_temperature


@dataclass(frozen=True)
class SamplingConfig:
    """Temperature (0 = greedy, else from ``limits.MIN_TEMPERATURE`` to 100: ``limits.check_temperature``, the one
    rule every surface meets here), top-k (0 = off) and top-p (1 = off)."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self):
        check_temperature(self.temperature)
        if not (isinstance(self.top_k, int) and self.top_k >= 0):
            raise ExplorerError(f"top_k must be a whole number >= 0 (0 turns it off), got {self.top_k!r}")
        if not (isinstance(self.top_p, (int, float)) and 0.0 < self.top_p <= 1.0):
            raise ExplorerError(f"top_p must be in (0, 1] (1 turns it off), got {self.top_p!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def warp(logits: torch.Tensor, cfg: SamplingConfig) -> torch.Tensor:
    """Logits (K, V) -> probabilities (K, V) after temperature, top-k and top-p, in float32.

    Greedy gives the one-hot of the argmax. Top-p keeps the smallest set of most likely tokens whose
    mass reaches ``top_p`` (always at least the most likely one).
    """
    logits = logits.float()
    if cfg.greedy:
        return torch.nn.functional.one_hot(logits.argmax(dim=-1), logits.shape[-1]).float()
    logits = logits / cfg.temperature  # finite: the temperature is at least limits.MIN_TEMPERATURE
    if 0 < cfg.top_k < logits.shape[-1]:
        kth = torch.topk(logits, cfg.top_k, dim=-1).values[..., -1:]  # (K, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if cfg.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (K, V)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        # drop a token when the mass *before* it already reaches top_p
        drop_sorted = (cumulative - sorted_logits.softmax(dim=-1)) >= cfg.top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits.softmax(dim=-1)


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """One token id from a distribution (V,). A row that is not a distribution (NaN or infinite entries, nothing
    positive: a model whose logits overflowed) is refused in one line before ``torch.multinomial`` sees it (it
    raised "probability tensor contains either inf, nan or element < 0", shown as a server failure)."""
    total = float(probs.sum())  # NaN or inf anywhere makes the sum so
    if not (math.isfinite(total) and total > 0 and float(probs.min()) >= 0):
        raise ExplorerError("the model's next-token distribution is not a distribution (NaN or infinite "
                            "probabilities): its logits overflowed; try greedy decoding (temperature 0)")
    return int(torch.multinomial(probs, 1, generator=generator).item())


def distribution(logits: torch.Tensor, cfg: SamplingConfig) -> torch.Tensor:
    """The distribution a round records and (when sampling) decides with: (K, V) float32.

    Sampling: the warped distribution. Greedy: the softmax at temperature 1 — the decision is the argmax
    either way, and the softmax keeps the model's confidence visible in the trace.
    """
    return logits.float().softmax(dim=-1) if cfg.greedy else warp(logits, cfg)


def choose(probs: torch.Tensor, cfg: SamplingConfig, generator: torch.Generator | None) -> int:
    """The next token from a ``distribution`` row (V,): its argmax when greedy, else a draw."""
    return int(probs.argmax().item()) if cfg.greedy else sample(probs, generator)


class Rng:
    """One seeded generator per device, so a run is reproducible from its seed wherever it runs."""

    def __init__(self, seed: int):
        self.seed = seed
        self._generators: dict[str, torch.Generator] = {}

    def on(self, device: torch.device) -> torch.Generator:
        key = str(device)
        if key not in self._generators:
            self._generators[key] = torch.Generator(device=device).manual_seed(self.seed)
        return self._generators[key]
