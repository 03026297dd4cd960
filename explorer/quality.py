"""How far a lossy method's output is from the large model's own output (pure Python).

Token agreement is position-wise over the reference (the large model's greedy output); ROUGE-L is the
F-measure of the longest common subsequence of the two token lists (Lin, 2004), the summarisation
metric the BiLD paper reports (Figure 9).
"""

from __future__ import annotations


def first_divergence(output: list[int], reference: list[int]) -> int | None:
    """The first position where the two differ (None when one is a prefix of the other and equal length)."""
    for i, (a, b) in enumerate(zip(output, reference)):
        if a != b:
            return i
    return None if len(output) == len(reference) else min(len(output), len(reference))


def token_agreement(output: list[int], reference: list[int]) -> float:
    """Fraction of the reference's positions where the output has the same token."""
    if not reference:
        return 1.0 if not output else 0.0
    return sum(a == b for a, b in zip(output, reference)) / len(reference)


def rouge_l(output: list[int], reference: list[int]) -> float:
    """ROUGE-L F1 over tokens: 2·P·R / (P + R) with P, R = LCS / lengths."""
    if not output or not reference:
        return float(output == reference)
    previous = [0] * (len(reference) + 1)
    for a in output:  # LCS by dynamic programming, one row at a time
        current = [0]
        for j, b in enumerate(reference):
            current.append(previous[j] + 1 if a == b else max(previous[j + 1], current[j]))
        previous = current
    lcs = previous[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(output), lcs / len(reference)
    return 2 * precision * recall / (precision + recall)


def compare(output: list[int], reference: list[int]) -> dict:
    """All three, as plain data for traces, tables and the UI."""
    return {"agreement": token_agreement(output, reference), "rouge_l": rouge_l(output, reference),
            "first_divergence": first_divergence(output, reference)}
