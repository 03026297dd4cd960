"""The lossless audit in words and a figure (``explorer.audit`` computes it; nothing here needs a model)."""

from __future__ import annotations

import plotly.graph_objects as go

from ..chi_square import MIN_EXPECTED
from ..words import plural
from .style import BASELINE_COLOUR, FATE_COLOURS, base_layout, empty_figure
from .text import label, plotly_text, quoted, safe_markdown

NEAR_TIE = 1e-3  # logits: a margin this small can flip when the same sums are added in another order


def greedy_audit_text(trace, baseline, audit) -> str:
    """Markdown for ``explorer.audit.greedy_audit``'s result (``audit``; None: say why there is none)."""
    if trace is None or not trace.rounds:
        return ""
    lossy = trace.settings.lossy
    if trace.method == "ar":
        return "**Lossless audit.** This is plain decoding itself: the reference other runs are audited against."
    if trace.settings.temperature != 0:
        return ("**Lossless audit.** A sampled run cannot be compared token by token with plain decoding (the two "
                "draw their random numbers differently). Run the **sampling audit** below: it checks that the "
                "method's first token follows the target's own distribution over many seeds.")
    if audit is None:
        return ("**Lossless audit.** Appears once plain decoding has run on the same prompt and settings (right "
                "after this run).")
    kind = "a lossy method, so differences are expected" if lossy else "a lossless method: it must match exactly"
    dtype = getattr(trace, "dtype", None) or "float32"
    if dtype != "float32":  # the baseline ran in the run's dtype: lossless is against that model
        kind += f"; plain decoding ran in {safe_markdown(dtype)} too"
    if audit.diverges_at is None:
        verdict = "✓ identical" if not lossy else "identical (this time)"
        return (f"**Lossless audit.** {verdict}: all {audit.compared} tokens equal plain decoding's "
                f"({safe_markdown(trace.method)} is {kind}).")
    at = audit.diverges_at
    words = (f"**Lossless audit.** {'⚠ ' if not lossy else ''}First differs from plain decoding at token {at + 1} of "
             f"{audit.compared}: plain decoding chose {safe_markdown(label(baseline, audit.theirs))}, this run "
             f"{safe_markdown(label(trace, audit.ours))}; {audit.agreement:.0%} of tokens agree "
             f"({safe_markdown(trace.method)} is {kind}).")
    if audit.margin_plain is not None:
        words += (f" The target's top-2 logit margin there: {audit.margin_plain:.2e} in plain decoding"
                  + (f", {audit.margin_run:.2e} as this run's verification computed it" if audit.margin_run is not None
                     else "") + ".")
        if not lossy:
            words += (" A near tie: batched verification adds the same numbers in another order, and rounding "
                      "can flip it." if audit.margin_plain < NEAR_TIE else
                      " Not a near tie: this should not happen; please report it with the trace.")
    return words


# How a run's first token came about (``RoundTrace.emitted_kind``), as what the target did: a whole clause each
# ("the first token was the target's correction after a refusal in 20" read as a token count)
PATH_WORDS = {"accepted": "accepted the draft's token",
              "corrected": "refused the draft's first token and drew its own correction",
              "bonus": "accepted every draft and added its own bonus token",
              "target": "decoded it alone (nothing was drafted)"}


def first_token_paths(audit) -> str:
    """"In 15 of the 20 runs the target refused …; in 5 it accepted …" (the commonest way first)."""
    ranked = sorted(audit.paths.items(), key=lambda kv: -kv[1])
    clauses = []
    for i, (kind, n) in enumerate(ranked):
        words = PATH_WORDS.get(kind, safe_markdown(kind))
        if i:
            clauses.append(f"in {n} it {words}")
        else:
            runs = f"all {audit.runs} runs" if n == audit.runs else f"{n} of the {audit.runs} runs"
            clauses.append(f"In {runs} the target {words}")
    return "; ".join(clauses) + "." if clauses else ""


def sampling_audit_text(audit, lossy: bool) -> str:
    """Markdown for a ``SamplingAudit``: the χ² test's verdict from its numbers, or, where every draw fell in one
    bin, that the test could not fail and what would give it power."""
    head = (f"**Sampling audit**: {audit.runs} seeded runs at temperature {audit.temperature:g}. "
            f"{first_token_paths(audit)} Pearson's χ² = {audit.chi2:.1f} over "
            f"{plural(audit.dof, 'degree of freedom', 'degrees of freedom')}, **p = {audit.p_value:.3g}**.")
    if audit.impossible:
        return head + f" ⚠ {audit.impossible} draws were tokens the target gives probability 0."
    if audit.powerless:
        return head + " " + _no_power(audit)
    if audit.p_value >= 0.01:
        return head + (" Consistent with the target's own distribution (p ≥ 0.01)." if not lossy else
                       " Not distinguishable from the target's distribution at this many runs.")
    return head + (" The first token does **not** follow the target's distribution (p < 0.01)"
                   + (": expected for a lossy method." if lossy else ": a lossless method should not do this "
                      "(rerun with more runs; 1 in 100 honest audits lands here by chance)."))


def _no_power(audit) -> str:
    """Why a one-bin audit proves nothing, and what would let it fail."""
    likeliest = getattr(audit, "likeliest", None)
    sure = (f"the target gives its likeliest first token probability {likeliest:.3f} at this temperature"
            if likeliest is not None else "the target's first token is near-certain")
    ways = []
    if getattr(audit, "temperature_for_power", None) is not None:
        ways.append(f"set the temperature to {audit.temperature_for_power:g} (Sampling, in Watch)")
    if getattr(audit, "runs_for_power", None) is not None:
        ways.append(f"run at least {audit.runs_for_power} runs")
    ways.append("pick a prompt whose first word is open (\"Name a fruit.\", \"Tell me a story.\")")
    return (f"⚠ **This test cannot fail here**: {sure}, so every other token is expected fewer than "
            f"{MIN_EXPECTED:g} times in {audit.runs} runs and all the draws share one bin: χ² has nothing to compare, "
            f"whatever the method does. To give it power, {', or '.join(ways)}.")


def sampling_audit_figure(audit) -> go.Figure:
    """Observed first tokens against the counts the target's distribution expects, one bar pair per token."""
    if audit is None:
        return empty_figure("Sampling audit", "Run the sampling audit to see the first token's counts.")
    labels = [("all other tokens" if t is None else plotly_text(quoted(audit.token_text.get(t, f"⟨{t}⟩"))))
              for t, _, _ in audit.bins]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=[n for _, n, _ in audit.bins], name="observed (this method)",
                         marker_color=FATE_COLOURS["accepted"], hovertemplate="%{x}: %{y} runs<extra>observed</extra>"))
    fig.add_trace(go.Scatter(x=labels, y=[e for _, _, e in audit.bins], name="expected from the target's p",
                             mode="markers", marker={"color": BASELINE_COLOUR, "symbol": "line-ew-open", "size": 28,
                                                     "line": {"width": 3}},
                             hovertemplate="%{x}: %{y:.1f} expected<extra>target</extra>"))
    fig.update_layout(xaxis={"title": {"text": "first token"}, "type": "category"},
                      yaxis={"title": {"text": "runs"}, "rangemode": "tozero"})
    return base_layout(fig, f"Sampling audit: first token over {audit.runs} runs (χ² p = {audit.p_value:.3g})",
                       height=340)

