"""Algorithm 1's accept/reject rule on hand-built distributions where the outcome is certain, and a
seeded check that one step of speculative sampling emits tokens distributed as p."""

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from explorer.engine.acceptance import greedy_accept, residual_distribution, speculative_accept


def dist(*probs):
    return torch.tensor(probs, dtype=torch.float32)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_identical_distributions_accept_every_draft_and_add_a_bonus():
    p = torch.stack([dist(0.1, 0.2, 0.7)] * 4)  # (K+1, V) with K = 3
    q = p[:3]
    for seed in range(20):
        v = speculative_accept(p, q, [2, 0, 1], gen(seed))
        assert v.n_accepted == 3 and v.next_kind == "bonus" and v.residual is None
        assert len(v.uniforms) == 3


def test_draft_token_impossible_under_target_is_always_rejected():
    # p(x=0) = 0 while q(x=0) = 1: the ratio p/q is 0, so every uniform rejects
    p = torch.stack([dist(0.0, 0.5, 0.5), dist(0.3, 0.3, 0.4)])
    q = dist(1.0, 0.0, 0.0)[None]
    for seed in range(20):
        v = speculative_accept(p, q, [0], gen(seed))
        assert v.n_accepted == 0 and v.next_kind == "corrected"
        assert v.next_token in (1, 2)  # the residual puts no mass on the rejected token
        assert torch.allclose(v.residual, dist(0.0, 0.5, 0.5))


def test_rejection_at_second_position_keeps_the_first():
    p = torch.stack([dist(0.0, 1.0, 0.0), dist(0.0, 0.0, 1.0), dist(1.0, 0.0, 0.0)])
    q = torch.stack([dist(0.0, 1.0, 0.0), dist(0.0, 1.0, 0.0)])
    v = speculative_accept(p, q, [1, 1], gen())
    assert (v.n_accepted, v.next_token, v.next_kind) == (1, 2, "corrected")
    assert len(v.uniforms) == 2  # one compared per tested draft, none for the discarded ones


def test_draft_less_likely_under_draft_than_target_is_always_accepted():
    # q(x) <= p(x) gives ratio >= 1: accepted whatever the uniform
    p = torch.stack([dist(0.2, 0.8), dist(0.5, 0.5)])
    q = dist(0.6, 0.4)[None]
    assert all(speculative_accept(p, q, [1], gen(s)).n_accepted == 1 for s in range(50))


def test_residual_is_normalised_positive_part_of_p_minus_q():
    p, q = dist(0.5, 0.3, 0.2), dist(0.2, 0.6, 0.2)
    assert torch.allclose(residual_distribution(p, q), dist(1.0, 0.0, 0.0))
    p, q = dist(0.4, 0.4, 0.2), dist(0.1, 0.8, 0.1)
    assert torch.allclose(residual_distribution(p, q), dist(0.75, 0.0, 0.25))


def test_residual_that_sums_to_zero_falls_back_to_p():
    p = dist(0.25, 0.25, 0.5)
    assert torch.allclose(residual_distribution(p, p.clone()), p)


def test_no_drafts_samples_from_p():
    p = dist(0.0, 1.0, 0.0)[None]
    v = speculative_accept(p, torch.empty(0, 3), [], gen())
    assert (v.n_accepted, v.next_token, v.next_kind) == (0, 1, "bonus")


@pytest.mark.parametrize("drafted,argmax,expected", [
    ([5, 6, 7], [5, 6, 7, 8], (3, 8, "bonus")),      # all match: the bonus is the target's next argmax
    ([5, 6, 7], [5, 9, 7, 8], (1, 9, "corrected")),  # first mismatch at 1: emit the target's token there
    ([5, 6, 7], [4, 6, 7, 8], (0, 4, "corrected")),  # nothing accepted
    ([], [3], (0, 3, "bonus")),                      # no drafts: plain greedy step
])
def test_greedy_prefix_match(drafted, argmax, expected):
    v = greedy_accept(argmax, drafted)
    assert (v.n_accepted, v.next_token, v.next_kind) == expected


def test_first_emitted_token_follows_p_whatever_q():
    """The paper's Theorem (A.1): accept-or-resample emits x ~ p. 20 000 seeded trials, chi-square."""
    p = dist(0.05, 0.4, 0.1, 0.3, 0.15)
    q = dist(0.5, 0.05, 0.3, 0.05, 0.1)
    g = gen(1234)
    counts = np.zeros(5)
    n = 20000
    for _ in range(n):
        x = int(torch.multinomial(q, 1, generator=g))
        v = speculative_accept(torch.stack([p, p]), q[None], [x], g)
        counts[x if v.n_accepted else v.next_token] += 1
    stat, pvalue = chisquare(counts, p.numpy() * n)
    assert pvalue > 1e-3, (counts / n, p)
    # and it is not q's distribution (the test can tell them apart)
    assert chisquare(counts, q.numpy() * n).pvalue < 1e-6
