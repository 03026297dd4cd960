"""Lossless: greedy speculative == greedy ar == HF ``generate`` token for token on the real default
model with each drafter (fp32), and sampled tokens distributed as the target's on tiny models."""

import numpy as np
import pytest
import torch
from helpers import PREFIX, chi_square_pvalue, exact_two_token_distribution

import explorer
from explorer.engine.sampling import SamplingConfig

PROMPTS = [
    "Why is the sky blue?",
    "Write a Python function that returns the n-th Fibonacci number.",
    "Repeat after me: the cat sat on the mat, the cat sat on the mat, the cat sat on the mat.",
]
NEW = 40


def hf_greedy(model, ids, n):
    x = torch.tensor([ids])
    with torch.inference_mode():
        out = model.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, do_sample=False)
    return out[0, len(ids):].tolist()


@pytest.fixture(scope="module")
def references(default_model):
    """Our ar output and HF's, per prompt (computed once)."""
    refs = {}
    for prompt in PROMPTS:
        ar = explorer.decode(default_model, prompt, method="ar", max_new_tokens=NEW)
        refs[prompt] = (list(ar.output_ids), hf_greedy(default_model, list(ar.prompt_ids), NEW))
    return refs


@pytest.mark.parametrize("prompt", PROMPTS)
def test_ar_equals_hf_generate(references, prompt):
    ours, hf = references[prompt]
    assert ours == hf


@pytest.mark.parametrize("draft,controller", [
    ("prompt-lookup:3", "fixed"), ("early-exit:4", "fixed"), ("early-exit:8", "heuristic"),
    ("model:default", "fixed"), ("prompt-lookup:2", "heuristic"), ("early-exit:4", "beta-ts"),
    ("early-exit:6", "cali-ts"), ("prompt-lookup:3", "beta-ts"), ("early-exit:8:untrained", "cost-aware"),
    ("early-exit:4", "cali-ts-priced"), ("prompt-lookup:3", "beta-ts-priced"), ("prompt-lookup:3", "dynamic-gamma"),
    ("early-exit:4", "dynamic-gamma-priced"),
])
def test_greedy_speculative_equals_ar(default_model, references, draft, controller):
    for prompt in PROMPTS:
        t = explorer.decode(default_model, prompt, method="speculative", draft=draft, gamma=4,
                            controller=controller, max_new_tokens=NEW)
        assert list(t.output_ids) == references[prompt][0], (draft, prompt)
    if draft == "model:default":  # the target drafting for itself: every draft is accepted
        assert t.summary.alpha_hat == 1.0


def test_prompt_lookup_accepts_on_a_repetitive_prompt(default_model):
    t = explorer.decode(default_model, PROMPTS[2], draft="prompt-lookup:3", gamma=4, max_new_tokens=NEW)
    assert t.summary.tokens_per_target_forward > 1.3


# -- sampling -----------------------------------------------------------------------------------------

N_RUNS = 3000


@pytest.mark.parametrize("cfg,gamma", [(SamplingConfig(1.0), 1), (SamplingConfig(1.5, top_k=16, top_p=0.97), 3)])
def test_sampled_tokens_follow_the_target_distribution(tiny_target, tiny_draft, cfg, gamma):
    p0, p1 = exact_two_token_distribution(tiny_target, cfg)
    counts = np.zeros((2, p0.shape[0]))
    accepted = 0
    for seed in range(N_RUNS):
        t = explorer.decode(tiny_target, prompt_ids=PREFIX, draft=tiny_draft, gamma=gamma, max_new_tokens=2,
                            temperature=cfg.temperature, top_k=cfg.top_k, top_p=cfg.top_p, seed=seed)
        counts[0, t.output_ids[0]] += 1
        counts[1, t.output_ids[1]] += 1
        accepted += t.summary.accepted
    assert 0.05 < accepted / N_RUNS < 0.9  # drafts are both accepted and rejected: both paths are tested
    assert chi_square_pvalue(counts[0], p0) > 1e-3
    assert chi_square_pvalue(counts[1], p1) > 1e-3


def test_the_chi_square_check_can_fail(tiny_target, tiny_draft):
    """The draft's own samples are far from the target's: the same check rejects them."""
    cfg = SamplingConfig(1.0)
    p0, _ = exact_two_token_distribution(tiny_target, cfg)
    counts = np.zeros(p0.shape[0])
    for seed in range(N_RUNS // 3):
        t = explorer.decode(tiny_draft, prompt_ids=PREFIX, method="ar", max_new_tokens=1, temperature=1.0, seed=seed)
        counts[t.output_ids[0]] += 1
    assert chi_square_pvalue(counts, p0) < 1e-6


def test_same_seed_same_output_and_other_seed_differs(tiny_target, tiny_draft):
    runs = [explorer.decode(tiny_target, "the cat", draft=tiny_draft, temperature=1.0, max_new_tokens=30, seed=s)
            for s in (5, 5, 6)]
    assert runs[0].output_ids == runs[1].output_ids
    assert runs[0].output_ids != runs[2].output_ids
