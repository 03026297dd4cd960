"""Example prompts of different kinds, each with a drafter that suits it."""

from __future__ import annotations

from dataclasses import dataclass

from explorer.engine.controllers import DEFAULT_CONTROLLER, DEFAULT_GAMMA

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
    gamma: int = DEFAULT_GAMMA
    controller: str = DEFAULT_CONTROLLER


# The first is what the page opens on (#48): the fastest lossless method, the target's own 4-bit weights drafting
# (with its preset: HF's heuristic from γ 8), on a question where the same copy alone writes other words within a
# sentence (on the developers' CPU it parts at token 7: "Canberra." against "Canberra, located in …") while drafting
# with it keeps every token and about 11 tokens a target pass: what keeping the text costs, shown by the first run.
EXAMPLES = (
    Example("factual QA", "What is the capital of Australia, and why was it chosen over Sydney and Melbourne?",
            "quantized", "int4", gamma=8, controller="heuristic"),
    Example("summarise a given text", f"Summarise this text in two sentences:\n\n{AMAZON}", "speculative", "prompt-lookup:3"),
    Example("chat", "Why is the sky blue? Answer in a short paragraph.", "speculative", "early-exit:8"),
    Example("code", "Write a Python function is_palindrome(s) that ignores case and spaces, with a docstring "
            "and two doctest examples.", "speculative", "prompt-lookup:2"),
)
