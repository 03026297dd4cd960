"""Who wrote a run's undrafted tokens: the target, or a stand-in that nobody checks.

In a speculative run every token is the target's: drafts it accepted, or its own token (a correction, a bonus,
a plain step). One run is different: ``quantized`` with the copy's role *alone*, where the target's own weights in
4 (or 8) bits decode by themselves, as a quantised model is served. Its trace has the shape of plain decoding
(one step a round, no draft), so every view that reads "one target step" would call the copy the target (#48:
"one autoregressive target step", tokens coloured *target*, "p (target)", "1.00 tokens per target pass"). Each
view asks ``writer(trace)`` instead and names what actually wrote the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

COPY_KINDS = {"int4": "4-bit", "int8": "8-bit"}


@dataclass(frozen=True)
class Writer:
    """What wrote a run's undrafted tokens, in the words each view needs."""

    fate: str  # the token fate the views colour them with: "target", or "copy" (unchecked, lossy)
    name: str  # "the target", "the 4-bit copy"
    short: str  # a chart's series: "target", "4-bit copy"
    step: str  # one round of a run without drafts: "one target step", "one step of the 4-bit copy alone"
    checked: bool  # whether the target checked every token (False: the text may differ from the target's)

    @property
    def symbol(self) -> str:
        """The probability series of its tokens: "p (target)", "p (4-bit copy)"."""
        return f"p ({self.short})"


TARGET = Writer("target", "the target", "target", "one autoregressive target step", True)


def copy_alone(trace) -> bool:
    """Whether ``trace`` is the target's low-bit copy decoding by itself (``quantized``, role alone)."""
    options = getattr(getattr(trace, "settings", None), "options", None) or {}
    return getattr(trace, "method", None) == "quantized" and options.get("role") == "alone"


def copy_bits(trace) -> str:
    """"4-bit" or "8-bit": the copy a ``quantized`` run used (its draft kind, int4 by default)."""
    return COPY_KINDS.get(str(getattr(trace, "draft", None) or "int4").partition(":")[0], "low-bit")


def writer(trace) -> Writer:
    """What wrote ``trace``'s undrafted tokens (``TARGET`` unless the copy decoded alone)."""
    if trace is None or not copy_alone(trace):
        return TARGET
    bits = copy_bits(trace)
    return Writer("copy", f"the {bits} copy", f"{bits} copy", f"one step of the {bits} copy alone (no target checks it)",
                  False)
