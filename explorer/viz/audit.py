"""The lossless audit in words and a figure (``explorer.audit`` computes it; nothing here needs a model)."""

from __future__ import annotations

import plotly.graph_objects as go

from .style import BASELINE_COLOUR, FATE_COLOURS, base_layout, empty_figure
from .text import label, quoted, safe_markdown

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
        verdict = "✅ identical" if not lossy else "identical (this time)"
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


# How a run's first token came about (``RoundTrace.emitted_kind``), in words: "was … in 40" ("came 40
# corrected" read as a number of tokens)
PATH_WORDS = {"accepted": "a draft the target accepted", "corrected": "the target's correction after a refusal",
              "bonus": "the target's bonus token after every draft passed", "target": "the target's own (no draft)"}


def sampling_audit_text(audit, lossy: bool) -> str:
    """Markdown for a ``SamplingAudit``: the χ² test's verdict from its numbers."""
    paths = ", ".join(f"{PATH_WORDS.get(kind, kind)} in {n}" for kind, n in
                      sorted(audit.paths.items(), key=lambda kv: -kv[1]))
    head = (f"**Sampling audit**: {audit.runs} seeded runs at temperature {audit.temperature:g}; the first token "
            f"was {paths}. Pearson's χ² = {audit.chi2:.1f} over {audit.dof} degrees of freedom, **p = "
            f"{audit.p_value:.3g}**.")
    if audit.impossible:
        return head + f" ⚠ {audit.impossible} draws were tokens the target gives probability 0."
    if audit.p_value >= 0.01:
        return head + (" Consistent with the target's own distribution (p ≥ 0.01)." if not lossy else
                       " Not distinguishable from the target's distribution at this many runs.")
    return head + (" The first token does **not** follow the target's distribution (p < 0.01)"
                   + (": expected for a lossy method." if lossy else ": a lossless method should not do this "
                      "(rerun with more runs; 1 in 100 honest audits lands here by chance)."))


def sampling_audit_figure(audit) -> go.Figure:
    """Observed first tokens against the counts the target's distribution expects, one bar pair per token."""
    if audit is None:
        return empty_figure("Sampling audit", "Run the sampling audit to see the first token's counts.")
    labels = [("all other tokens" if t is None else quoted(audit.token_text.get(t, f"⟨{t}⟩")))
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

