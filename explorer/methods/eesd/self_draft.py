"""Self-speculation over one KV cache: the early-exit draft and the target share their first N layers
(EESD 3.1, Figure 2).

The target is split at layer N. The draft is the first N layers + an exit head (a trained exit layer and
its norm, or untrained: the model's own norm) + the LM head (optionally only some of its rows). Both read
and write one ``DynamicCache`` for the target's layers:

    draft step   runs the first N layers on the new token (its KV lands in the target's own cache for
                 those layers, its layer-N hidden state h_N is kept), then the exit head
    verification runs the first N layers only for the tokens no draft step has run (the last drafted
                 token), then layers N+1..L on the kept h_N of the pending token and every draft

so no layer ever runs twice on the same position, and a rejected draft is dropped from every layer
by cropping. The exit's layers attend over their own cache (they have no counterpart in the target).

Lengths (each a prefix of ``ids``): layers < N and ``hidden`` hold ``len(ids)`` positions, layers ≥ N
hold ``high_len``, the exit layer ``exit_len``.

Shape legend: T new tokens, H hidden size, V vocabulary, V' the draft's scored rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from transformers import DynamicCache

from ...engine.cache import common_prefix, new_cache
from ...engine.fast import fast_linear, fast_view
from ...engine.forward import fast_decoder, lm_head, run_layers
from ...engine.trie_cache import TrieCache

if TYPE_CHECKING:  # the exit head's type (exits.py)
    from .exits import ExitHead


def crop_layers(cache: DynamicCache, layers: range, length: int) -> None:
    """Keep the first ``length`` positions of the given layers only (the others keep theirs)."""
    for i in layers:
        if i < len(cache.layers):
            excess = cache.layers[i].get_seq_length() - length
            if excess > 0:
                cache.layers[i].crop(-excess)


class SelfSpeculation:
    """The target split at its exit layer N, drafting and verifying over one cache."""

    def __init__(self, model: torch.nn.Module, head: ExitHead, device: torch.device):
        self.base = fast_decoder(model)
        self.head = head
        self.n = head.n_layers
        self.total = len(self.base.layers)
        self.device = device
        self.lm_head = model.get_output_embeddings()
        self.logits_of = lm_head(model)  # the same head, in the fastest form for this device (engine.forward)
        # the draft's head rows as a function (H,) -> (V',): a copy of the scored rows, so a step multiplies
        # (V', H) and not (V, H), packed like every linear on the CPU fast path
        rows = None if head.vocab is None else self.lm_head.weight[head.vocab].detach().clone()
        self.draft_rows = None if rows is None else fast_linear(rows, model)
        self.exit_layers = [fast_view(layer, like=model) for layer in head.layers]
        self.vocab_size = self.lm_head.weight.shape[0]
        self.cache = new_cache()
        self.exit_cache = new_cache()
        self.ids: list[int] = []
        self.hidden: torch.Tensor | None = None  # (1, len(ids), H): h_N per position
        self.top: torch.Tensor | None = None  # (1, high_len, H): the target's final normed state per position
        self.draft_state: torch.Tensor | None = None  # (H,): the exit's normed state of the latest draft step
        self.draft_len = 0  # the length of the sequence that draft step read
        self.high_len = 0
        self.exit_len = 0
        self.draft_forwards = 0
        self.target_forwards = 0

    # -- the two passes -------------------------------------------------------------------------------

    def draft_logits(self, sequence: list[int]) -> torch.Tensor:
        """(V,) logits of the draft for the token after ``sequence``; −inf outside the scored rows."""
        x = self._exit_states(sequence, 1)  # (1, H)
        self.draft_state, self.draft_len = x[0], len(sequence)
        return self._draft_scores(x)[0]

    def exit_logits(self, sequence: list[int], n_logits: int) -> torch.Tensor:
        """(n_logits, V) draft logits for the last ``n_logits`` positions of ``sequence`` in one pass: the
        draft as a verifier of a smaller draft (hierarchical speculative decoding)."""
        return self._draft_scores(self._exit_states(sequence, n_logits))

    def _exit_states(self, sequence: list[int], n_logits: int) -> torch.Tensor:
        """The exit's normed states (n_logits, H) of the last ``n_logits`` positions."""
        with torch.inference_mode():
            self._advance_low(sequence)
            if not self.exit_layers:
                h = self.hidden[:, len(sequence) - n_logits:]
            else:
                start = len(sequence) - n_logits
                if self.exit_len > start:  # positions to score again (a re-asked sequence)
                    crop_layers(self.exit_cache, range(len(self.exit_layers)), start)
                    self.exit_len = start
                h = self._run(self.exit_layers, self.hidden[:, self.exit_len:], self.exit_len,
                              self.exit_cache)[:, -n_logits:]
                self.exit_len = len(sequence)
            states = self.head.norm(h)[0]  # (n_logits, H)
        self.draft_forwards += 1
        return states

    def _draft_scores(self, x: torch.Tensor) -> torch.Tensor:
        """States (n, H) -> logits (n, V); −inf outside the scored rows."""
        with torch.inference_mode():
            if self.draft_rows is None:
                return self.logits_of(x)
            logits = torch.full((x.shape[0], self.vocab_size), float("-inf"), dtype=x.dtype, device=x.device)
            logits[:, self.head.vocab] = self.draft_rows(x)
            return logits

    def verify_logits(self, sequence: list[int], n_logits: int) -> torch.Tensor:
        """(n_logits, V) target logits for the last ``n_logits`` positions of ``sequence``; equal to a
        full forward up to float rounding (tests: fp32, 1e-4)."""
        with torch.inference_mode():
            self._advance_low(sequence)
            keep = min(self.high_len, len(sequence) - n_logits)
            self._crop_high(keep)
            h = self._run(self.base.layers[self.n:], self.hidden[:, keep:], keep, self.cache)
            self.high_len = len(sequence)
            top = self.base.norm(h)  # (1, T, H)
            self.top = top if self.top is None or keep == 0 else torch.cat([self.top[:, :keep], top], dim=1)
            logits = self.logits_of(top[:, -n_logits:])[0]
        self.target_forwards += 1
        return logits

    def theta_states(self, step: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(H_t^(T), H_{t+i}^(D)) of EESD eq. 5 for 0-based draft step ``step`` of the round: the target's
        state at the position that produced the round's last committed token, and the latest draft state.
        None before the target has run."""
        if self.top is None or self.draft_state is None:
            return None
        position = min(self.draft_len - step - 2, self.top.shape[1] - 1)
        return (self.top[0, max(position, 0)], self.draft_state) if position >= 0 else None

    def row_scorer(self):
        """The draft as a ``TrieCache`` (several sequences in one forward: beam search's draft beams): the first
        N layers, then the exit layer over caches of their own, the exit's norm and the draft's scored rows."""
        stages = [self.base.layers[: self.n]] + ([self.exit_layers] if self.exit_layers else [])
        return TrieCache(self.base, stages, self.head.norm, self._draft_scores, self.device)

    # -- bookkeeping ------------------------------------------------------------------------------

    def truncate_target(self, length: int) -> None:
        """Layers ≥ N keep at most ``length`` positions (the round loop re-runs the pending token)."""
        self._crop_high(min(self.high_len, length))

    def _advance_low(self, sequence: list[int]) -> None:
        """Run the first N layers over whatever of ``sequence`` they have not seen."""
        keep = common_prefix(self.ids, sequence)
        self.cut(keep)
        if keep < len(sequence):
            new = torch.tensor([sequence[keep:]], dtype=torch.long, device=self.device)  # (1, T)
            h = self._run(self.base.layers[: self.n], self.base.embed_tokens(new), keep, self.cache)
            self.hidden = h if self.hidden is None else torch.cat([self.hidden, h], dim=1)
            self.ids = list(sequence)

    def cut(self, length: int) -> None:
        """Keep the first ``length`` positions in every layer and the exit (a rollback)."""
        if length < len(self.ids):
            crop_layers(self.cache, range(self.n), length)
            self.hidden = self.hidden[:, :length]
            del self.ids[length:]
        self._crop_high(min(self.high_len, length))
        if self.exit_len > length:
            crop_layers(self.exit_cache, range(len(self.exit_layers)), length)
            self.exit_len = length

    def _crop_high(self, length: int) -> None:
        crop_layers(self.cache, range(self.n, self.total), length)
        self.high_len = length
        if self.top is not None:
            self.top = self.top[:, :length]

    def _run(self, layers, hidden: torch.Tensor, past: int, cache: DynamicCache) -> torch.Tensor:
        """Decoder layers over T new positions after ``past`` cached ones; (1, T, H) in and out."""
        return run_layers(self.base, layers, hidden, past, cache)


class DraftRunner:
    """The draft side as a ``CachedForward``-like runner (``logits``/``truncate``/``ids``/``forwards``),
    so ``ForwardDrafter`` drafts with it unchanged."""

    def __init__(self, shared: SelfSpeculation):
        self.shared = shared

    def logits(self, sequence: list[int], n_logits: int = 1) -> torch.Tensor:
        """The exit's logits (n_logits, V): the next token's when drafting (one step), several positions'
        when it verifies a smaller draft (hierarchical)."""
        if n_logits == 1:
            return self.shared.draft_logits(sequence)[None]  # (1, V)
        return self.shared.exit_logits(sequence, n_logits)

    def truncate(self, length: int) -> None:
        self.shared.cut(length)

    @property
    def ids(self) -> list[int]:
        return self.shared.ids

    @property
    def forwards(self) -> int:
        return self.shared.draft_forwards


class SharedVerifier:
    """The round loop's target runner (``logits``/``truncate``) over a ``SelfSpeculation``."""

    def __init__(self, shared: SelfSpeculation):
        self.shared = shared

    def logits(self, sequence: list[int], n_logits: int = 1) -> torch.Tensor:
        return self.shared.verify_logits(sequence, n_logits)

    def truncate(self, length: int) -> None:
        self.shared.truncate_target(length)

    @property
    def forwards(self) -> int:
        return self.shared.target_forwards
