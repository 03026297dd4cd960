"""Example prompts of different kinds, each with a drafter that suits it."""

from __future__ import annotations

from dataclasses import dataclass

AMAZON = (
    "The Amazon rainforest covers about 5.5 million square kilometres across nine countries, most of it in "
    "Brazil. It holds roughly one in ten of the world's known species and stores a vast amount of carbon. "
    "Deforestation, mainly for cattle ranching and soy farming, has cleared nearly a fifth of the forest "
    "since 1970, and scientists warn that further losses could turn parts of it into savanna."
)


@dataclass(frozen=True)
class Example:
    kind: str
    prompt: str
    method: str
    draft: str


EXAMPLES = (
    Example("summarise a given text", f"Summarise this text in two sentences:\n\n{AMAZON}", "speculative", "prompt-lookup:3"),
    Example("chat", "Why is the sky blue? Answer in a short paragraph.", "speculative", "early-exit:8"),
    Example("code", "Write a Python function is_palindrome(s) that ignores case and spaces, with a docstring "
            "and two doctest examples.", "speculative", "prompt-lookup:2"),
    Example("factual QA", "What is the capital of Australia, and why was it chosen over Sydney and Melbourne?",
            "speculative", "early-exit:12"),
)
