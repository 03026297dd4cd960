"""Model pairs: a target and the drafts that suit it, chosen together (the page's pair button, ``--pair`` on
``run`` and ``bench``).

``smollm2-1.7b`` is where speculation pays on a GPU: SmolLM2-1.7B-Instruct as the target, drafted by the
default SmolLM2-135M-Instruct (same tokenizer) and by prompt lookup. On a GPU a forward of a model this
size is bound by reading its weights, so a draft step costs about the size ratio, c ≈ 135 M / 1.7 B ≈ 0.08,
and verifying γ + 1 tokens costs about one target step: Leviathan et al.'s Theorem 3.8 as written. On a
CPU the same c holds but verification costs more than a step (``docs/measurements.md``, T(n)/T(1)), and
a 1.7 B target decodes a few tokens a second. It needs the Hub (its weights) and, on a Space, a GPU (the
Space's size cap is raised for it only there: ``limits.hf_max_params``).

``tiny`` is the same wiring offline (two tiny random models that share a vocabulary) for the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ExplorerError
from .limits import GPU_PAIR_TARGET
from .theory import speedup


@dataclass(frozen=True)
class Pair:
    name: str
    target: str  # a model spec
    drafts: tuple[str, ...]  # draft specs, the first the one a run takes
    target_params_m: float
    draft_params_m: float
    gamma: int = 4
    label: str = ""
    fetch: str = ""  # what its first use downloads, in words

    @property
    def c(self) -> float:
        """The draft's cost per token as a share of the target's where both are bound by reading weights."""
        return self.draft_params_m / self.target_params_m

    def why(self, alpha: float = 0.6) -> str:
        """Why the first draft wins on a GPU, in words, with Theorem 3.8 at this pair's c."""
        gain = float(speedup(alpha, self.gamma, self.c))
        return (f"{self.label or self.target} drafted by {self.drafts[0]}: on a GPU a forward of models this size is "
                f"bound by reading the weights, so a draft token costs about the size ratio, c ≈ "
                f"{self.draft_params_m:g} M / {self.target_params_m:,.0f} M ≈ {self.c:.2f} of a target step, and "
                f"checking γ + 1 = {self.gamma + 1} tokens costs about one step. At α = {alpha:g} and γ = "
                f"{self.gamma}, Theorem 3.8 gives {gain:.2f}× plain decoding (with the 135 M model as its own "
                f"target, c ≈ 1 and drafting can only lose). Also try {', '.join(self.drafts[1:])}.")


PAIRS = {
    "smollm2-1.7b": Pair("smollm2-1.7b", f"hf:{GPU_PAIR_TARGET}", ("model:default", "prompt-lookup:3"), 1711, 135,
                         label="SmolLM2-1.7B-Instruct", fetch="its weights come from the Hub on first use (3.4 GB)"),
    "tiny": Pair("tiny", "tiny-random:1", ("model:tiny-random:1:1", "prompt-lookup:3"), 2, 1,
                 label="a two-layer tiny random model (the offline stand-in)"),
}
GPU_PAIR = "smollm2-1.7b"


def get_pair(name: str) -> Pair:
    """The pair of that name; ``ExplorerError`` naming the pairs for any other."""
    if name not in PAIRS:
        raise ExplorerError(f"unknown pair {str(name)[:40]!r}: use one of {', '.join(PAIRS)}")
    return PAIRS[name]
