"""Lenience (Leviathan et al. A.5), lossy: l = 1 is the exact rule; below it the emitted token follows
min(q, p/l) + P(reject)·norm(max(0, p − l·q)) — never more than p/l — and each lenient accept is recorded;
greedy accepts a draft the target gives at least l × its top probability."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

import explorer
from explorer import viz
from explorer.engine.acceptance import greedy_accept, speculative_accept
from explorer.viz.views.lenient import lenience_figure

PROMPT = "Correct the spelling: Me and my freind goes to the libary every weeks."


def dist(*probs):
    return torch.tensor(probs, dtype=torch.float32)


def lenient_law(p: np.ndarray, q: np.ndarray, l: float) -> np.ndarray:
    """The distribution of the token one lenient step emits (draft x ~ q, one position)."""
    accepted = np.minimum(q, p / l)
    residual = np.maximum(p - l * q, 0)
    return accepted + (1 - accepted.sum()) * residual / residual.sum()


def test_lenience_one_is_the_exact_rule():
    p, q = torch.stack([dist(0.5, 0.3, 0.2)] * 2), dist(0.1, 0.1, 0.8)[None]
    for seed in range(50):
        exact = speculative_accept(p, q, [2], torch.Generator().manual_seed(seed))
        same = speculative_accept(p, q, [2], torch.Generator().manual_seed(seed), lenience=1.0)
        assert (exact.n_accepted, exact.next_token, exact.uniforms) == (same.n_accepted, same.next_token, same.uniforms)
        assert same.lenient == ()


def test_one_lenient_step_emits_the_lenient_law_and_never_more_than_p_over_l():
    p, q, l = np.array([0.5, 0.3, 0.15, 0.05]), np.array([0.05, 0.05, 0.1, 0.8]), 0.3
    law = lenient_law(p, q, l)
    assert np.all(law <= p / l + 1e-12) and not np.allclose(law, p)  # bounded, and lossy
    pt, qt = torch.tensor(np.stack([p, p]), dtype=torch.float32), torch.tensor(q[None], dtype=torch.float32)
    counts, lenient = np.zeros(4), 0
    runs = 6000
    generator = torch.Generator().manual_seed(0)
    for _ in range(runs):
        x = int(torch.multinomial(qt[0], 1, generator=generator))
        v = speculative_accept(pt, qt, [x], generator, lenience=l)
        counts[x if v.n_accepted else v.next_token] += 1
        lenient += len(v.lenient)
        assert v.n_accepted == 1 or v.next_kind == "corrected"
    assert chisquare(counts, law * runs).pvalue > 1e-3
    assert chisquare(counts, p * runs).pvalue < 1e-6  # the exact law is refused: lenience changed the output
    assert lenient > 0.05 * runs  # and the verdicts say where


def test_greedy_lenience_accepts_a_draft_close_enough_to_the_top():
    p = torch.stack([dist(0.5, 0.4, 0.1), dist(0.6, 0.3, 0.1), dist(0.2, 0.2, 0.6)])  # (K+1, V), K = 2
    argmax = p.argmax(-1).tolist()
    assert greedy_accept(argmax, [1, 1]).n_accepted == 0  # exact: the top token only
    v = greedy_accept(argmax, [1, 1], p, lenience=0.7)  # 0.4 ≥ 0.7·0.5, but 0.3 < 0.7·0.6
    assert (v.n_accepted, v.next_token, v.lenient) == (1, 0, (0,))
    v = greedy_accept(argmax, [1, 1], p, lenience=0.5)
    assert (v.n_accepted, v.next_token, v.next_kind, v.lenient) == (2, 2, "bonus", (0, 1))


def test_lenient_method_exact_at_one_and_lossy_below(default_model):
    ar = explorer.decode(default_model, PROMPT, max_new_tokens=24)
    exact = explorer.decode(default_model, PROMPT, method="lenient", draft="early-exit:4", lenience=1.0,
                            max_new_tokens=24)
    assert exact.output_ids == ar.output_ids and exact.summary.predicted_speedup is not None
    assert all(not r.detail for r in exact.rounds)
    loose = explorer.decode(default_model, PROMPT, method="lenient", draft="early-exit:4", lenience=0.1,
                            max_new_tokens=24)
    assert loose.settings.options == {"lenience": 0.1} and loose.summary.predicted_speedup is None
    accepts = [(r, i) for r in loose.rounds for i in r.detail["lenient_accepts"]]
    assert accepts, "l = 0.1 should accept some draft the target does not rank first"
    for r, i in accepts:  # each recorded lenient accept: not the target's top, yet within l of it
        top = r.target_top[i][0]
        assert r.drafted[i] != top[0] and r.p_drafted[i] >= 0.1 * top[1] - 1e-6
    assert loose.output_ids != ar.output_ids
    assert explorer.load_trace(loose.to_json()) == loose
    with pytest.raises(explorer.ExplorerError, match=r"lenience \(l\) must be from 0.01 to 1"):
        explorer.decode(default_model, PROMPT, method="lenient", draft="early-exit:4", lenience=0.0)


def test_the_page_says_lenience_is_lossy_and_draws_its_view(default_model):
    t = explorer.decode(default_model, PROMPT, method="lenient", draft="prompt-lookup:2", lenience=0.2,
                        max_new_tokens=16)
    banner = viz.method_banner("lenient", explorer.METHODS["lenient"], t.settings.lossy)
    assert "Lossy method" in banner and "1/l" in banner
    assert "lenience" in {v.name for v in viz.views_for(t)}
    fig = lenience_figure(t, 0)
    only = sum(len(r.detail["lenient_accepts"]) for r in t.rounds)
    assert sum(fig.data[1].y) == only and sum(fig.data[0].y) + only == t.summary.accepted


def test_the_sweep_reports_what_lenience_changes(default_model):
    from explorer import sweep

    report = sweep.run("lenience", "default", values={"leniences": (1.0, 0.1)}, max_new_tokens=12, prompts=[PROMPT],
                       progress=lambda *a: None)
    exact, loose = report["points"]
    assert exact["identical"] == 1 and exact["agreement"] == 1.0 and exact["lenient_share"] == 0
    assert loose["lenient_share"] > 0 and loose["agreement"] < 1 and loose["first_divergence_median"] <= 12
    assert loose["alpha_hat"] >= exact["alpha_hat"]
    assert "| 0.1 |" in sweep.table("lenience", report)
    # every speed-up is a fact or says why not (#48): the pace recorded, exact lenience bound as lossless
    for point in report["points"]:
        assert point["doubt"] is None or "busy" in point["doubt"] or "more than a lossless run" in point["doubt"]
