"""The record every other module uses: ``LoadedModel`` (a causal LM ready to decode, its tokenizer, device
and dtype) and ``CharTokenizer`` (the tiny-random models' 32-character vocabulary)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import torch

from ..errors import ModelLoadError


class CharTokenizer:
    """The tiny-random models' vocabulary: 32 characters, one id each (no special tokens).

    Enough for the CLI and tests to use text prompts with a model built in memory.
    """

    ALPHABET = "abcdefghijklmnopqrstuvwxyz .,!?\n"

    def encode(self, text: str) -> list[int]:
        unknown = sorted({ch for ch in text.lower() if ch not in self.ALPHABET})
        if unknown:
            raise ModelLoadError(
                f"tiny-random models only know the characters {self.ALPHABET!r}; "
                f"the prompt has {''.join(unknown)!r}"
            )
        return [self.ALPHABET.index(ch) for ch in text.lower()]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.ALPHABET[i] for i in ids)


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A causal LM ready to decode, plus what is needed to turn text into ids and back."""

    name: str
    model: torch.nn.Module
    tokenizer: object | None
    device: torch.device
    dtype: torch.dtype

    @property
    def vocab_size(self) -> int:
        """Rows of the output head: what draft and target must agree on."""
        return int(self.model.get_output_embeddings().weight.shape[0])

    @property
    def eos_token_ids(self) -> frozenset[int]:
        """Ids that end a generation (from the generation config, else the config)."""
        ids = set()
        for source in (getattr(self.model, "generation_config", None), self.model.config):
            eos = getattr(source, "eos_token_id", None) if source is not None else None
            if eos is None:
                continue
            ids.update([eos] if isinstance(eos, int) else eos)
        return frozenset(int(i) for i in ids)

    def encode(self, text: str, chat: bool = True) -> list[int]:
        """Prompt text to ids; ``chat`` wraps it as one user turn of the model's chat template."""
        if self.tokenizer is None:
            raise ModelLoadError(f"model {self.name!r} has no tokenizer: pass prompt_ids (a list of token ids)")
        if isinstance(self.tokenizer, CharTokenizer):
            return self.tokenizer.encode(text)
        if chat and getattr(self.tokenizer, "chat_template", None):
            ids = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
            )
            if hasattr(ids, "keys"):  # some tokenizers return a BatchEncoding
                ids = ids["input_ids"]
            return [int(i) for i in ids]
        return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=True)]

    def decode(self, ids: list[int]) -> str:
        """Ids to text (special tokens dropped); ids joined with spaces when there is no tokenizer."""
        if self.tokenizer is None:
            return " ".join(str(i) for i in ids)
        if isinstance(self.tokenizer, CharTokenizer):
            return self.tokenizer.decode(ids)
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def token_texts(self, ids: list[int]) -> dict[int, str]:
        """Each id's own text piece (special tokens kept), for showing tokens one by one."""
        unique = sorted(set(int(i) for i in ids))
        if self.tokenizer is None:
            return {i: f"<{i}>" for i in unique}
        if isinstance(self.tokenizer, CharTokenizer):
            return {i: self.tokenizer.decode([i]) for i in unique}
        return {i: self.tokenizer.decode([i], skip_special_tokens=False) for i in unique}


# What other modules build from a loaded model and keep while the model lives (a method's low-bit copy of its
# weights): each registers here a function giving the bytes it holds for a model (``torch.nn.Module``), so that
# the model cache (``api.load_cached``) counts them in its byte budget. The default's two low-bit copies took
# ≈ 0.5 GB that the budget did not see (issue 51).
DERIVED_BYTES: list[Callable[[torch.nn.Module], int]] = []


def derived_bytes(model: torch.nn.Module) -> int:
    """Bytes held by what was built from ``model`` (``DERIVED_BYTES``)."""
    return sum(count(model) for count in DERIVED_BYTES)


def resident_bytes() -> int:
    """This process's resident memory (Linux ``/proc``; 0 where it cannot be read)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
