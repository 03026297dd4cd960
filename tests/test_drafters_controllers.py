"""Prompt lookup's n-gram copy, the draft-length controllers, and their records in the trace."""

import explorer
import torch

from explorer.engine.controllers import Confident, Fixed, Heuristic
from explorer.engine.drafters import PromptLookupDrafter
from explorer.engine.sampling import Rng, SamplingConfig

GREEDY, RNG = SamplingConfig(0.0), Rng(0)


def lookup(context, n=3, k=4):
    return PromptLookupDrafter(n).propose(context, k, GREEDY, RNG, Fixed(k)).tokens


def test_prompt_lookup_copies_what_followed_the_most_recent_match():
    #            0  1  2  3  4  5  6  7  8  9 10
    context = [1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 1, 2, 3]
    assert lookup(context) == [7, 8, 1, 2]  # the later "1 2 3" (at 5) wins over the first (at 0)
    assert lookup(context, k=2) == [7, 8]


def test_prompt_lookup_falls_back_to_shorter_ngrams_and_may_draft_nothing():
    assert lookup([5, 6, 7, 6, 8, 1, 6]) == [8, 1, 6]  # no 3- or 2-gram match; the 1-gram "6" at 3
    assert lookup([1, 2, 3, 4]) == []


def test_heuristic_grows_after_full_acceptance_and_shrinks_otherwise():
    h = Heuristic(4)
    assert h.update(4, 4) == {"kind": "heuristic", "gamma_before": 4, "gamma_after": 6}
    assert h.update(6, 2)["gamma_after"] == 5
    for _ in range(10):
        h.update(h.gamma, 0)
    assert h.gamma == 1  # never below one
    assert h.update(0, 0)["gamma_after"] == 1  # a round without drafts teaches nothing


def test_confident_stops_after_a_token_the_draft_is_unsure_of_and_says_so():
    c = Confident(8, floor=0.5)
    assert c.keep_drafting(0, torch.tensor([0.9, 0.1])) and c.keep_drafting(1, None)  # sure; a copy has no q
    assert not c.keep_drafting(2, torch.tensor([0.4, 0.35, 0.25]))  # top 0.4 < 0.5: stop after this token
    assert c.update(3, 3) == {"kind": "confident", "gamma_before": 8, "gamma_after": 10, "unsure": 0.4, "floor": 0.5}
    assert "unsure" not in c.update(10, 4)  # said once, for the round that stopped


def test_confident_decodes_exactly_and_its_stops_are_drawn(tiny_target, tiny_draft, monkeypatch):
    """Greedy output unchanged (a stop rule only shortens drafts); every round that stopped unsure drafted fewer
    than its γ, the trace keeps why through a save and load, and the controller view marks those rounds. The
    floor raised to 0.9: the tiny random draft is rarely below the shipped 0.1."""
    from explorer.viz.views.controller import controller_figure

    monkeypatch.setattr(Confident, "FLOOR", 0.9)
    settings = dict(draft=tiny_draft, gamma=6, max_new_tokens=30)
    plain = explorer.decode(tiny_target, "abc", method="ar", max_new_tokens=30).output_ids
    t = explorer.decode(tiny_target, "abc", controller="confident", **settings)
    assert t.output_ids == plain
    stopped = [r for r in t.rounds if "unsure" in r.controller]
    assert stopped, "the tiny random draft is unsure somewhere"
    assert all(r.controller["unsure"] < r.controller["floor"] and len(r.drafted) <= r.controller["gamma_before"]
               for r in stopped)
    again = explorer.load_trace(t.to_json())
    assert [r.controller for r in again.rounds] == [r.controller for r in t.rounds]
    marks = [d for d in controller_figure(again, 0).data if d.name == "draft stopped: unsure"]
    assert marks and list(marks[0].x) == [r.index + 1 for r in stopped]
    assert all(text.endswith("below the floor 0.90") for text in marks[0].customdata)


def test_controller_state_is_recorded_per_round(tiny_target, tiny_draft):
    t = explorer.decode(tiny_target, "abc", draft=tiny_draft, controller="heuristic", gamma=2,
                        temperature=1.0, max_new_tokens=30, seed=4)
    for before, after in zip(t.rounds, t.rounds[1:]):
        assert after.controller["gamma_before"] == before.controller["gamma_after"]
        assert len(after.drafted) <= after.controller["gamma_before"]
    fixed = explorer.decode(tiny_target, "abc", draft=tiny_draft, gamma=3, max_new_tokens=10)
    assert all(r.controller == {"kind": "fixed", "gamma": 3} for r in fixed.rounds if r.drafted)


def test_cost_aware_drafts_nothing_when_verification_is_dear_and_acceptance_low():
    from explorer.engine.controllers import CostAware
    from explorer.trace import Timing

    flat = CostAware(4, (0.1, 0.1, 0.1, 0.1, 0.1))  # a GPU-like curve: verifying 5 costs one step
    assert flat.draft_length() == 4  # optimistic prior, free drafts: draft the most
    dear = CostAware(4, (0.1, 0.16, 0.17, 0.18, 0.19))  # this CPU: two tokens cost 1.6 steps
    for _ in range(6):  # every draft rejected at once
        state = dear.update(4, 0, Timing(0.01, 0.19, 0.0), 4)
    assert dear.alpha < 0.3 and dear.draft_length() == 0 and state["gamma_after"] == 0
    for _ in range(80):  # nothing drafted for a while: the estimate relaxes and drafting is re-tried
        dear.update(0, 0, Timing(0.0, 0.1, 0.0), 0)
    assert dear.draft_length() > 0
    assert 0.0 < dear.c < 1.0  # draft step 2.5 ms over a target step of ~0.1 s


def test_cost_aware_keeps_acceptance_apart_per_evidence():
    """1-gram prompt-lookup matches that keep failing stop being drafted; 3-gram matches that pay go on,
    where one global α would have averaged the two."""
    from explorer.engine.controllers import CostAware
    from explorer.trace import Timing

    ctl = CostAware(4, (0.1, 0.16, 0.17, 0.18, 0.19))
    for _ in range(10):
        assert ctl.draft_length("3-gram match") == 4
        ctl.update(4, 3, Timing(0.0, 0.18, 0.0), 0)
        k = ctl.draft_length("1-gram match")
        state = ctl.update(k, 0, Timing(0.0, 0.1 if k == 0 else 0.16, 0.0), 0)
        assert state["evidence"] == "1-gram match"
    assert ctl.draft_length("1-gram match") == 0 and ctl.alpha_for("1-gram match") < 0.4
    assert ctl.alpha_for("3-gram match") > 0.7
    assert ctl.draft_length(None) == 4  # evidence never seen: the optimistic prior


def test_prompt_lookup_reports_its_match():
    from explorer.engine.drafters import PromptLookupDrafter

    drafter = PromptLookupDrafter(3)
    assert drafter.evidence([1, 2, 3, 9, 1, 2, 3]) == "3-gram match"
    assert drafter.evidence([5, 2, 3, 9, 1, 2, 3]) == "2-gram match"
    assert drafter.evidence([5, 6, 7, 8]) is None


def test_cost_aware_is_lossless(default_model, shipped_exit4_agreement):
    prompt = "Correct the spelling: Me and my freind goes to the libary every weeks."
    ar = explorer.decode(default_model, prompt, method="ar", max_new_tokens=32)
    for draft in ("prompt-lookup:3", "early-exit:4"):
        t = explorer.decode(default_model, prompt, draft=draft, controller="cost-aware", max_new_tokens=32)
        assert t.output_ids == ar.output_ids
        assert all(r.controller["kind"] == "cost-aware" for r in t.rounds)
        if draft == "early-exit:4":  # the shipped exit's held-out agreement is the prior, not 0.8
            assert abs(t.rounds[0].controller["alpha_before"] - shipped_exit4_agreement) < 1e-6
        else:  # each round says which match its draft rested on, and the controller view shows it
            from explorer.viz.views.controller import controller_figure

            # which matches come up depends on which drafts were accepted, hence on the measured costs:
            # assert only what holds for every timing (the prompt's words recur, so some round matched)
            evidence = [r.controller.get("evidence") for r in t.rounds]
            assert any(evidence) and set(evidence) <= {None, "1-gram match", "2-gram match", "3-gram match"}
            assert list(controller_figure(t, 0).data[0].customdata) == [e or "" for e in evidence]


def test_cost_aware_starts_from_a_measured_acceptance():
    """With the exit's measured 29 % agreement, drafting never pays where verifying 2 tokens costs 1.6
    steps, and pays where verification is flat (a GPU): no exploratory drafts on the CPU."""
    from explorer.engine.controllers import CostAware

    dear, flat = CostAware(4, (0.1, 0.16, 0.17, 0.18, 0.19)), CostAware(4, (0.1,) * 5)
    dear.prior_alpha = flat.prior_alpha = 0.29
    assert dear.draft_length() == 0 and flat.draft_length() > 0
    assert dear.draft_length("1-gram match") == 4  # other evidence keeps the optimistic prior


def test_the_drafter_is_asked_for_evidence_only_by_a_controller_that_uses_it(tiny_target, monkeypatch):
    from explorer.engine.drafters import PromptLookupDrafter

    asked = []
    real = PromptLookupDrafter.evidence
    monkeypatch.setattr(PromptLookupDrafter, "evidence", lambda self, context: asked.append(1) or real(self, context))
    explorer.decode(tiny_target, "abcabcabc", draft="prompt-lookup:3", max_new_tokens=8)
    assert asked == []  # fixed γ: the search would be wasted
    explorer.decode(tiny_target, "abcabcabc", draft="prompt-lookup:3", controller="cost-aware", max_new_tokens=8)
    assert asked


def test_a_draft_is_not_verified_past_its_end_of_sequence_token(default_model):
    """A draft that runs past the end of the text is cut after the end-of-sequence token before the
    target verifies it: nothing after the end shows as tested and refused."""
    from explorer.engine.controllers import make_controller
    from explorer.engine.speculative import decode_rounds
    from explorer.methods.synthetic import SyntheticDrafter

    ar = explorer.decode(default_model, "Answer with one word: what colour is the sky?", max_new_tokens=64)
    assert ar.summary.stop_reason == "eos"
    oracle = list(ar.prompt_ids) + list(ar.output_ids) + [5, 6, 7]  # the target's own text, then junk
    ends_drafted = 0
    for gamma in (7, 8):
        drafter = SyntheticDrafter(oracle, 1.0, 0.0, default_model.vocab_size, 0, "synthetic")
        rounds = [r for r, _ in decode_rounds(default_model, drafter, make_controller("fixed", gamma),
                                              SamplingConfig(0.0), list(ar.prompt_ids), 64, Rng(0))]
        assert [t for r in rounds for t in r.emitted] == list(ar.output_ids)
        for r in rounds:
            ends = [i for i, t in enumerate(r.drafted) if t in default_model.eos_token_ids]
            assert not ends or ends[0] == len(r.drafted) - 1
            ends_drafted += bool(ends)
    assert ends_drafted  # at one of the two γ the end fell inside a draft (not on the bonus token)
