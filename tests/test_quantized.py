"""The target's own weights in low bits as its draft (``int4`` / ``int8``, method ``quantized``): the copy's
weights, its exactness as a draft (greedy and sampled), its fallback, its refusals, its views."""

import numpy as np
import pytest
import torch
from helpers import PREFIX, chi_square_pvalue, exact_two_token_distribution

import explorer
from explorer.engine import lowbit
from explorer.engine.sampling import SamplingConfig
from explorer.errors import ExplorerError
from explorer.methods import parse_system
from explorer.methods.quantized.lowbit_copy import lowbit_copy
from explorer.models.default import local_default_gguf
from explorer.models.gguf import q4_1_blocks
from explorer.viz.views.quantized import copy_html, margin_figure, margins_by_fate, partings
from explorer.words import plural

PROMPTS = ["Why is the sky blue?", "Write a Python function that returns the n-th Fibonacci number."]


# -- the weights ----------------------------------------------------------------------------------------

def test_rounded_blocks_are_the_q4_1_grid():
    weight = torch.randn(48, 64)
    blocks = lowbit.Int4Blocks.rounded(weight)
    assert blocks.codes.dtype == torch.uint8 and int(blocks.codes.max()) <= 15
    step = blocks.scale.repeat_interleave(lowbit.GROUP, 1)  # (O, I): each weight's grid step
    assert bool(((blocks.dense() - weight).abs() <= step / 2 + 1e-6).all())  # round to nearest: within half a step
    exact = lowbit.Int4Blocks.rounded(blocks.dense())  # weights on the grid come back as themselves
    assert torch.equal(exact.codes, blocks.codes)


@pytest.mark.parametrize("family", ["int4", "int8"])
def test_a_low_bit_product_is_the_product_of_its_weights(family):
    weight = torch.randn(96, 64) * 0.1
    if family == "int4":
        linear = lowbit.LowBitLinear.int4(lowbit.Int4Blocks.rounded(weight))
        dense = lowbit.Int4Blocks.rounded(weight).dense()
    else:
        linear = lowbit.LowBitLinear.int8(weight)
        codes, scales = lowbit.int8_rows(weight)
        dense = codes.float() * scales[:, None]
    x = torch.randn(5, 64)
    got = linear(x.bfloat16()).float()
    assert got.shape == (5, 96)
    assert float((got - x @ dense.T).abs().max()) < 0.05  # bf16 activations: a few ulps of the product


@pytest.mark.model
def test_the_gguf_blocks_rebuild_the_float_target_exactly(default_model):
    blocks = q4_1_blocks(local_default_gguf(), default_model.model.config)
    weights = dict(default_model.model.named_parameters())
    assert len(blocks) == 30 * 7
    for name, b in blocks.items():  # q and k included: their rows permuted as transformers loads them
        assert torch.equal(b.dense(), weights[name].detach()), name


@pytest.mark.model
def test_the_int4_copy_agrees_with_the_target_as_its_prior_says(default_model):
    """Teacher-forced on held-out prompts (the bank's, one per kind; 5 × 48 greedy tokens of the target): the
    copy's next token is the target's ≥ 97 % of the time, within 2 points of the prior the drafter hands the
    controllers (measured on 10 × 64 tokens)."""
    from explorer.bench import heldout_prompts
    from explorer.engine.cache import new_cache
    from explorer.methods.quantized.drafter import EXACT_INT4_AGREEMENT

    copy = lowbit_copy(default_model, "int4").decoder
    agree = stepped = total = 0
    for prompt in heldout_prompts(5):
        run = explorer.decode(default_model, prompt["text"], method="ar", max_new_tokens=48)
        ids, out = list(run.prompt_ids), list(run.output_ids)
        with torch.inference_mode():
            guesses = copy(torch.tensor([ids + out[:-1]]), new_cache(), len(out)).argmax(-1).tolist()
            # ...and one token at a time, as it drafts (a one-token step: every layer and the head in one call where it can)
            cache = new_cache()
            steps = [int(copy(torch.tensor([ids]), cache, 1).argmax())]
            steps += [int(copy(torch.tensor([[token]]), cache, 1).argmax()) for token in out[:-1]]
        agree += sum(a == b for a, b in zip(guesses, out))
        stepped += sum(a == b for a, b in zip(steps, out))
        total += len(out)
    assert agree / total >= 0.97 and abs(agree / total - EXACT_INT4_AGREEMENT) <= 0.02, agree / total
    assert stepped / total >= 0.97 and abs(stepped / total - EXACT_INT4_AGREEMENT) <= 0.02, stepped / total


# -- exactness as a draft -------------------------------------------------------------------------------

@pytest.mark.model
def test_the_default_models_int4_copy_is_its_own_blocks_and_drafts_exactly(default_model):
    copy = lowbit_copy(default_model, "int4")
    assert copy.exact_weights and "GGUF" in copy.about()
    for prompt in PROMPTS:
        ar = explorer.decode(default_model, prompt, method="ar", max_new_tokens=40)
        run = explorer.decode(default_model, prompt, method="quantized", max_new_tokens=40)
        assert run.output_ids == ar.output_ids, prompt
        assert run.settings.gamma >= 4 and run.draft == "int4"
        assert run.summary.acceptance_rate > 0.8  # the copy agrees with the target almost always


@pytest.mark.parametrize("draft", ["int4", "int8"])
@pytest.mark.parametrize("model", ["tiny-random:1", "tiny-random:3:3"])
def test_greedy_with_a_low_bit_draft_equals_ar_on_tiny_models(draft, model):
    for prompt in ("hello there", "the cat sat on"):
        ar = explorer.decode(model, prompt, method="ar", max_new_tokens=30)
        run = explorer.decode(model, prompt, method="speculative", draft=draft, gamma=5, max_new_tokens=30)
        assert run.output_ids == ar.output_ids
        assert run.summary.drafted > 0
    assert "round-to-nearest" in run.draft_about  # no GGUF for a tiny model: rounded, and it says so


N_RUNS = 1500  # ≈ 0.7 s per 100 here; enough for p > 1e-3 to fail a 5 % bias on these 32-token laws


def test_sampled_tokens_with_an_int4_draft_follow_the_target(tiny_target):
    cfg = SamplingConfig(1.0)
    p0, p1 = exact_two_token_distribution(tiny_target, cfg)
    counts = np.zeros((2, p0.shape[0]))
    accepted = 0
    for seed in range(N_RUNS):
        t = explorer.decode(tiny_target, prompt_ids=PREFIX, draft="int4", gamma=2, max_new_tokens=2,
                            temperature=1.0, seed=seed)
        counts[0, t.output_ids[0]] += 1
        counts[1, t.output_ids[1]] += 1
        accepted += t.summary.accepted
    assert 0.1 < accepted / (2 * N_RUNS) < 0.95  # drafts both accepted and refused: both paths are tested
    assert chi_square_pvalue(counts[0], p0) > 1e-3
    assert chi_square_pvalue(counts[1], p1) > 1e-3


def test_without_the_kernel_the_copy_runs_de_quantised_and_says_so(monkeypatch):
    monkeypatch.setenv("EXPLORER_LOWBIT", "0")
    monkeypatch.setattr(lowbit, "_CHOICES", {})
    target = explorer.load("tiny-random:5")  # a fresh model: its copy is built under the switch
    run = explorer.decode(target, "hello there", method="speculative", draft="int4", gamma=4, max_new_tokens=24)
    assert run.output_ids == explorer.decode(target, "hello there", method="ar", max_new_tokens=24).output_ids
    assert "de-quantised to bfloat16 (EXPLORER_LOWBIT=0)" in run.draft_about
    assert lowbit_copy(target, "int4").decoder.layers[0].qkv.family == "dense"


# -- the copy alone (lossy) ----------------------------------------------------------------------------

def test_the_copy_alone_is_recorded_lossy_and_decodes_with_the_copy(tiny_target):
    run = explorer.decode(tiny_target, "hello there", method="quantized", quantized_role="alone",
                          max_new_tokens=20)
    assert run.settings.lossy and run.draft == "int4" and run.summary.drafted == 0
    # the copy's own greedy tokens, one forward at a time
    copy = lowbit_copy(tiny_target, "int4").decoder
    ids = list(run.prompt_ids)
    from explorer.engine.cache import new_cache
    with torch.inference_mode():
        for _ in range(20):
            ids.append(int(copy(torch.tensor([ids]), new_cache(), 1)[0].argmax()))
    assert list(run.output_ids) == ids[len(run.prompt_ids):]
    assert not explorer.decode(tiny_target, "hello there", method="quantized", max_new_tokens=4).settings.lossy


# -- names, systems, refusals ----------------------------------------------------------------------------

def test_the_systems_and_bad_names(tiny_target):
    assert parse_system("quantized") == {"method": "quantized"}
    assert parse_system("quantized:int8/beta-ts@5") == {"method": "quantized", "gamma": 5, "draft": "int8",
                                                          "controller": "beta-ts"}
    assert parse_system("quantized:alone") == {"method": "quantized", "quantized_role": "alone"}
    for bad in ("quantized:int5", "quantized:int4:alone/fixed", "quantized:alone:int4"):
        with pytest.raises(ExplorerError, match="write quantized"):
            parse_system(bad)
    for draft, words in (("int4:x", "write int4"), ("int5", "unknown draft")):
        with pytest.raises(ExplorerError, match=words) as err:
            explorer.decode(tiny_target, "hi", method="speculative", draft=draft, max_new_tokens=2)
        assert "\n" not in str(err.value)
    with pytest.raises(ExplorerError, match="int4 or int8"):
        explorer.decode(tiny_target, "hi", method="quantized", draft="prompt-lookup:2", max_new_tokens=2)


def test_the_preset_fills_draft_controller_and_gamma(tiny_target):
    preset = explorer.method_preset("quantized", "tiny-random:1")
    assert preset["why"] and set(preset) == {"draft", "controller", "gamma", "why"}
    run = explorer.decode(tiny_target, "hello there", method="quantized", max_new_tokens=40)
    assert (run.draft, run.settings.controller, run.settings.gamma) == (
        preset["draft"], preset["controller"], preset["gamma"])  # what the run used is what the preset says
    first, second = run.rounds[0], run.rounds[1]
    assert len(first.drafted) == preset["gamma"]  # the first round drafts the preset's γ
    if preset["controller"] == "heuristic":  # HF's schedule: +2 after a round accepted whole, −1 otherwise
        whole = first.n_accepted == len(first.drafted)
        assert len(second.drafted) == len(first.drafted) + (2 if whole else -1)
    given = explorer.decode(tiny_target, "hello there", method="quantized", draft="int8", controller="fixed",
                            gamma=2, max_new_tokens=12)
    assert (given.draft, given.settings.controller, given.settings.gamma) == ("int8", "fixed", 2)  # given wins
    assert {len(r.drafted) for r in given.rounds[:-1]} == {2}  # a fixed γ = 2 (the last round may be cut)


# -- the views ------------------------------------------------------------------------------------------

def test_the_views_say_where_the_copy_parted(tiny_target):
    run = explorer.decode(tiny_target, "hello there, how are you", method="quantized", max_new_tokens=40)
    parts = partings(run)
    assert parts and len(parts) == sum(r.rejected_at is not None for r in run.rounds)
    accepted, refused = margins_by_fate(run)
    assert len(accepted) == run.summary.accepted and len(refused) == len(parts)
    fig = margin_figure(run, 0)
    assert "refusals at a near-tie" in fig.layout.title.text and len(fig.data) == 2
    panel = copy_html(run, 0)
    assert f"parted {plural(len(parts), 'time')}" in panel and "<table" in panel
    alone = explorer.decode(tiny_target, "hello", method="quantized", quantized_role="alone", max_new_tokens=8)
    assert "decoded alone" in copy_html(alone, 0)
    assert "no target checked it" in str(margin_figure(alone, 0).layout.annotations[0].text)
    loaded = explorer.load_trace(run.to_json())  # a saved trace replays its views without a model
    assert copy_html(loaded, 0) == panel


# -- which kernel: decided once per machine, never by a busy moment (#49) -----------------------------------

@pytest.fixture
def no_vnni(monkeypatch):
    """torch's int4 kernel alone against the plain product (``engine.q4_vnni`` turned off for the test)."""
    from explorer.engine import q4_vnni

    monkeypatch.setenv("EXPLORER_Q4_VNNI", "0")
    assert q4_vnni.load() == "EXPLORER_Q4_VNNI=0"


def _fresh_choice(monkeypatch, tmp_path, timings, paces):
    """``choose`` in an empty cache with the products' timings and the pace probe given (the real kernels cannot
    be made slower on demand); returns (family, why). ``timings``: per round, each competing kernel's then the plain
    product's."""
    import explorer.pace

    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path))
    monkeypatch.setattr(lowbit, "_CHOICES", {})
    rounds, probes = iter(timings), iter(paces)
    monkeypatch.setattr(lowbit, "_best_s", lambda *calls: next(rounds))
    monkeypatch.setattr(explorer.pace, "probe_ms", lambda: next(probes))
    return lowbit.choose("int4", torch.device("cpu"), torch.bfloat16, 960, 576)


def test_a_kernel_choice_is_kept_for_the_machine(monkeypatch, tmp_path, no_vnni):
    dense_wins = [(4e-3, 1e-3)] * lowbit.ROUNDS
    family, why = _fresh_choice(monkeypatch, tmp_path, dense_wins, [1.6] * (lowbit.ROUNDS + 1))
    assert family == "dense" and "slower here" in why
    monkeypatch.setattr(lowbit, "_CHOICES", {})
    monkeypatch.setattr(lowbit, "_best_s", lambda *calls: pytest.fail("a kept choice is not timed again"))
    assert lowbit.choose("int4", torch.device("cpu"), torch.bfloat16, 960, 576) == \
        ("dense", why + "; measured once on this machine")


def test_a_busy_moment_decides_nothing(monkeypatch, tmp_path, no_vnni):
    """Dense timed faster while the pace probe moved 4× (a fresh app on a loaded machine): the kernel is kept
    for now and nothing is written, so the next process measures again."""
    family, why = _fresh_choice(monkeypatch, tmp_path, [(4e-3, 1e-3)] * lowbit.ROUNDS, [1.6, 6.4, 1.6, 6.4])
    assert family == "int4" and "busy" in why
    assert not list(tmp_path.rglob("lowbit-*.json"))


def test_one_round_the_kernel_wins_keeps_the_kernel(monkeypatch, tmp_path, no_vnni):
    rounds = [(4e-3, 1e-3), (1e-3, 2e-3), (4e-3, 1e-3)]
    family, _ = _fresh_choice(monkeypatch, tmp_path, rounds, [1.6] * (lowbit.ROUNDS + 1))
    assert family == "int4"


def test_torchs_int4_kernel_is_chosen_over_the_vnni_one_only_when_faster_every_time(monkeypatch, tmp_path):
    """Where ``engine.q4_vnni``'s kernel runs, it and torch's compete: torch's only where it was clearly faster in
    every round (as the plain product must be to win), and the reason names both."""
    from explorer.engine import q4_vnni

    if q4_vnni.load() is not None:
        pytest.skip(f"no VNNI kernel here: {q4_vnni.load()}")
    quiet = [1.6] * (lowbit.ROUNDS + 1)
    family, why = _fresh_choice(monkeypatch, tmp_path, [(3e-5, 1e-5, 9e-5)] * lowbit.ROUNDS, quiet)
    assert family == "int4" and why.startswith("torch's int4 kernel") and "VNNI int4 × int8 kernel 3.0× its time" in why
    once = [(3e-5, 1e-5, 9e-5), (1e-5, 3e-5, 9e-5), (3e-5, 1e-5, 9e-5)]
    family, why = _fresh_choice(monkeypatch, tmp_path / "again", once, quiet)
    assert family == "int4x8" and "9.0× a bfloat16 product" in why
