"""The lossless audit: greedy runs against plain decoding (first divergence, top-2 margin) and the
sampling audit (χ² of the first token against the target's own distribution) on real tiny models."""

from __future__ import annotations

import math

import pytest
from scipy.stats import chisquare

import explorer
from explorer.audit import chi_square, greedy_audit, sampling_audit, target_top_at, top2_margin
from explorer.viz.audit import greedy_audit_text, sampling_audit_figure, sampling_audit_text

PROMPT = "the cat sat on the mat."
TINY = "tiny-random:1"
TINY_DRAFT = "model:tiny-random:2:1"


@pytest.fixture(scope="module")
def plain():
    return explorer.decode(TINY, PROMPT, method="ar", max_new_tokens=24, chat=False)


def test_a_lossless_greedy_run_is_identical_to_plain_decoding(plain):
    run = explorer.decode(TINY, PROMPT, draft=TINY_DRAFT, max_new_tokens=24, chat=False)
    audit = greedy_audit(run, plain)
    assert audit.diverges_at is None and audit.compared == 24 and audit.agreement == 1.0
    assert "✓ identical: all 24 tokens" in greedy_audit_text(run, plain, audit)


def test_a_lossy_run_shows_where_it_leaves_plain_decoding_and_the_margin_there(plain):
    run = explorer.decode(TINY, PROMPT, method="lenient", draft=TINY_DRAFT, max_new_tokens=24, chat=False,
                          lenience=0.05)
    audit = greedy_audit(run, plain)
    assert audit.diverges_at is not None, "lenience 0.05 accepts nearly any draft: the output must change"
    at = audit.diverges_at
    assert list(run.output_ids[:at]) == list(plain.output_ids[:at]) and run.output_ids[at] != plain.output_ids[at]
    top = plain.rounds[at].target_top[0]  # plain decoding: one token per round
    assert audit.theirs == top[0][0] and audit.margin_plain == pytest.approx(math.log(top[0][1] / top[1][1]))
    assert audit.margin_run == pytest.approx(top2_margin(target_top_at(run, at)))
    text = greedy_audit_text(run, plain, audit)
    assert f"First differs from plain decoding at token {at + 1}" in text and "lossy method" in text


def test_sampled_runs_and_missing_baselines_are_explained(plain):
    sampled = explorer.decode(TINY, PROMPT, draft=TINY_DRAFT, max_new_tokens=8, chat=False, temperature=1.0)
    assert greedy_audit(sampled, plain) is None
    assert "sampling audit" in greedy_audit_text(sampled, plain, None)
    greedy = explorer.decode(TINY, PROMPT, draft=TINY_DRAFT, max_new_tokens=8, chat=False)
    assert "once plain decoding has run" in greedy_audit_text(greedy, None, None)


def test_chi_square_bins_match_scipy_and_impossible_draws_fail():
    probs = {1: 0.5, 2: 0.3, 3: 0.15, 4: 0.04, 5: 0.01}
    counts = {1: 52, 2: 27, 3: 16, 4: 4, 5: 1}
    chi2, dof, p, bins, impossible = chi_square(counts, probs, 100)
    # tokens 4 and 5 are each expected < 5 times: they share one "other" bin (expected 5)
    assert [b[0] for b in bins] == [1, 2, 3, None] and [b[1] for b in bins] == [52, 27, 16, 5] and impossible == 0
    ref = chisquare([52, 27, 16, 5], [50, 30, 15, 5])
    assert chi2 == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue) and dof == 3
    # an "other" bin expected < 5 times folds into the least likely kept token's bin
    folded = chi_square(counts, {1: 0.5, 2: 0.3, 3: 0.17, 4: 0.02, 5: 0.01}, 100)[3]
    assert [b[0] for b in folded] == [1, 2, 3] and [b[1] for b in folded] == [52, 27, 21]
    assert chi_square({1: 99, 9: 1}, probs, 100)[2] == 0.0  # token 9 has p = 0: not the target's distribution


@pytest.mark.parametrize("method,options,passes", [
    ("speculative", {}, True),
    ("lenient", {"lenience": 0.05}, False),  # lossy: accepts nearly any draft, so the draft's q shows through
])
def test_the_sampling_audit_passes_a_lossless_method_and_catches_a_lossy_one(method, options, passes):
    audit = sampling_audit(TINY, PROMPT, runs=300, method=method, draft=TINY_DRAFT, chat=False, **options)
    assert audit.runs == 300 and sum(n for _, n, _ in audit.bins) == 300
    assert sum(e for _, _, e in audit.bins) == pytest.approx(300)
    assert sum(audit.paths.values()) == 300 and audit.impossible == 0
    assert (audit.p_value > 1e-3) if passes else (audit.p_value < 1e-3), audit
    words = sampling_audit_text(audit, lossy=not passes)
    assert ("Consistent with the target's own distribution" in words) == passes
    # how the first token came about, in whole clauses with their counts (it read "came 40 corrected", then
    # "was the target's correction after a refusal in 20")
    assert " of the 300 runs the target " in words and "came " not in words
    assert all(f" {n} " in words for n in audit.paths.values())
    fig = sampling_audit_figure(audit)
    assert fig.layout.xaxis.title.text == "first token" and fig.layout.yaxis.title.text == "runs"


def test_the_sampling_audit_refuses_impossible_settings():
    with pytest.raises(explorer.ExplorerError, match="runs must be a whole number from 10"):
        sampling_audit(TINY, PROMPT, runs=5, draft=TINY_DRAFT)
    with pytest.raises(explorer.ExplorerError, match="temperature above 0"):
        sampling_audit(TINY, PROMPT, runs=10, temperature=0, draft=TINY_DRAFT)
