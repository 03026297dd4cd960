"""EESD's Thompson-sampling views (section 3.3, Appendix B) and the Appendix D metrics in the summary,
from hand-built traces whose ``controller`` dicts follow the engine's contract (no model)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

import explorer
from explorer import viz
from explorer.trace import RoundTrace, RunTrace, Settings, Summary, Timing, check_invariants
from explorer.viz.views import ts, views_for

DATA = Path(__file__).parent / "data"
TS_VIEWS = {"ts-posterior", "ts-round-decisions", "ts-theta-calibration"}
GAMMA = 4


# -- hand-built traces -------------------------------------------------------------------------------


def make_round(index: int, context: int, drafted: int, accepted: int, controller: dict) -> RoundTrace:
    """A round that drafted ``drafted`` tokens (ids 100, 101, …) and accepted the first ``accepted``:
    rejected at ``accepted`` when some were refused, a bonus after all, one target token after none."""
    ids = tuple(100 + i for i in range(drafted))
    if drafted == 0:
        event, kinds, rejected_at = "no-draft", ("target",), None
    elif accepted < drafted:
        event, kinds, rejected_at = "rejected", ("accepted",) * accepted + ("corrected",), accepted
    else:
        event, kinds, rejected_at = "all-accepted", ("accepted",) * accepted + ("bonus",), None
    emitted = ids[:accepted] + (7,)
    return RoundTrace(
        index=index, context_len=context, drafted=ids, q_drafted=(0.5,) * drafted, p_drafted=(0.4,) * drafted,
        n_accepted=accepted, emitted=emitted, emitted_kind=kinds, p_emitted=(0.4,) * len(emitted), event=event,
        timing=Timing(0.001 * drafted, 0.01, 0.0001), rejected_at=rejected_at, draft_forwards=drafted,
        target_forwards=1, controller=controller)


def beta_controller(alpha: float, beta: float, thetas: list[float], accepted: int) -> dict:
    """Algorithm 2's state for one round: χ = 1 until the last step, which stops the draft unless it hit
    the γ cap; after verification r = |Q_v| − 1, n = min(|Q_v| + 1, |Q_d|) (eq. 3–4)."""
    k = len(thetas)
    cont = [True] * k if k == GAMMA else [True] * (k - 1) + [False] * (k > 0)
    q_v = accepted + 1
    r, n = (q_v - 1, min(q_v + 1, k)) if k else (0, 0)
    return {"kind": "beta-ts", "alpha_before": alpha, "beta_before": beta, "alpha_after": alpha + r,
            "beta_after": beta + (n - r), "theta": thetas, "continue": cont, "r": r, "n": n}


def cali_controller(n: int, hat: float, models: list[float], accepted: int, sigma_m=0.2, sigma_s=0.5) -> dict:
    """Algorithm 3's state for one round: μ and σ from eq. 6–7 at each step, θ̂ updated by eq. 10."""
    k = len(models)
    w = sigma_s ** 2 / (n * sigma_m ** 2 + sigma_s ** 2)
    mu = [w * m + (1 - w) * hat for m in models]
    sigma = [math.sqrt(sigma_m ** 2 * sigma_s ** 2 / (sigma_s ** 2 + n * sigma_m ** 2))] * k
    cont = [True] * k if k == GAMMA else [True] * (k - 1) + [False] * (k > 0)
    return {"kind": "cali-ts", "theta_model": models, "mu": mu, "sigma": sigma,
            "theta": [min(1.0, m + 0.05) for m in mu], "continue": cont,
            "theta_hat": hat, "theta_hat_after": (hat * (n + 1) + accepted / max(k, 1)) / (n + 2), "n": n}


def make_summary(rounds, **extra) -> Summary:
    """The run's totals; ``extra`` (e.g. ``hm``) become Summary fields, added by a subclass where this
    checkout's Summary does not have them yet."""
    drafted = sum(len(r.drafted) for r in rounds)
    accepted = sum(r.n_accepted for r in rounds)
    new_tokens = sum(len(r.emitted) for r in rounds)
    fields = dict(new_tokens=new_tokens, rounds=len(rounds), drafted=drafted, accepted=accepted,
                  acceptance_rate=accepted / drafted if drafted else None, alpha_hat=None, mean_gamma=GAMMA,
                  tokens_per_target_forward=new_tokens / len(rounds), target_forwards=len(rounds),
                  draft_forwards=drafted, draft_s=0.01, verify_s=0.1, other_s=0.001, wall_s=0.12,
                  tokens_per_s=new_tokens / 0.12, c_measured=0.1, predicted_speedup=1.5, record_s=0.0,
                  stop_reason="max_new_tokens")
    known = {f.name for f in dataclasses.fields(Summary)}
    missing = [(name, object, None) for name in extra if name not in known]
    cls = dataclasses.make_dataclass("SummaryWithEESD", missing, bases=(Summary,), frozen=True) if missing else Summary
    return cls(**fields, **extra)


def make_trace(kind: str, plan: list[tuple[int, int]], **summary_extra) -> RunTrace:
    """A run of ``kind`` with one round per (drafted, accepted) in ``plan``."""
    rounds, context, alpha, beta, hat = [], 10, 1.0, 1.0, 0.5
    for i, (k, a) in enumerate(plan):
        if kind == "beta-ts":
            c = beta_controller(alpha, beta, [0.9 - 0.1 * j for j in range(k)], a)
            alpha, beta = c["alpha_after"], c["beta_after"]
        else:
            c = cali_controller(i, hat, [0.8 - 0.05 * j for j in range(k)], a)
            hat = c["theta_hat_after"]
        rounds.append(make_round(i, context, k, a, c))
        context += len(rounds[-1].emitted)
    rounds = tuple(rounds)
    settings = Settings(temperature=0.0, top_k=0, top_p=1.0, gamma=GAMMA, controller=kind, seed=0,
                        max_new_tokens=64)
    trace = RunTrace(method="eesd", model="test-model", draft="early-exit:2", settings=settings,
                     prompt_ids=tuple(range(10)), output_ids=tuple(t for r in rounds for t in r.emitted), text="",
                     rounds=rounds, summary=make_summary(rounds, **summary_extra), token_text={100: "A", 101: "B"})
    assert check_invariants(trace) == []
    return trace


PLAN = [(3, 1), (4, 4), (0, 0), (2, 2), (1, 0), (4, 2)]


@pytest.fixture(scope="module")
def beta_trace():
    return make_trace("beta-ts", PLAN)


@pytest.fixture(scope="module")
def cali_trace():
    return make_trace("cali-ts", PLAN)


def by_name(fig, name: str):
    matches = [d for d in fig.data if d.name == name]
    assert len(matches) == 1, [d.name for d in fig.data]
    return matches[0]


def texts(fig) -> str:
    return " ".join([fig.layout.title.text or ""] + [a.text or "" for a in fig.layout.annotations])


# -- which traces get the views ----------------------------------------------------------------------


def test_views_apply_to_ts_traces_only(beta_trace, cali_trace):
    assert TS_VIEWS - {"ts-theta-calibration"} <= {v.name for v in views_for(beta_trace)}
    assert "ts-theta-calibration" not in {v.name for v in views_for(beta_trace)}
    assert TS_VIEWS <= {v.name for v in views_for(cali_trace)}
    for name in ("ar", "prompt_lookup", "bild", "sampled_tiny"):
        other = explorer.load_trace((DATA / f"trace_{name}.json").read_text())
        assert not TS_VIEWS & {v.name for v in views_for(other)}, name


def test_the_page_shows_the_views_for_a_ts_trace(cali_trace):
    """The app's view slots (explorer.ui.views) make these views visible and render them."""
    gr = pytest.importorskip("gradio")
    from explorer.ui.views import build_view_slots, slot_updates

    with gr.Blocks():
        slots = build_view_slots()
    updates = slot_updates(slots, cali_trace, 1)
    shown = {s.view.name for s in slots if updates[s.box].visible is True}  # else "hidden"
    assert TS_VIEWS <= shown and "controller" not in shown
    for s in slots:
        if s.view.name in TS_VIEWS:
            assert "failed" not in texts(updates[s.output])


# -- TS posterior ------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha, beta", [(1, 1), (2, 5), (30, 4), (3.5, 80)])
def test_beta_density_integrates_to_one_over_the_unit_interval(alpha, beta):
    density = ts.beta_density(alpha, beta)
    assert np.sum(density) / ts.BINS == pytest.approx(1.0, abs=5e-3)
    stats = pytest.importorskip("scipy.stats")
    assert np.allclose(density, stats.beta.pdf(ts.GRID, alpha, beta), rtol=1e-9)


def test_posterior_heatmap_holds_each_rounds_beta_density_and_its_mean(beta_trace):
    fig = ts.posterior_figure(beta_trace, 2)
    heat = by_name(fig, "posterior density")
    z = np.asarray(heat.z, dtype=float)  # (θ bins, rounds)
    assert z.shape == (ts.BINS, len(beta_trace.rounds))
    assert np.allclose(z.sum(axis=0) / ts.BINS, 1.0, atol=5e-3)
    for j, r in enumerate(beta_trace.rounds):
        c = r.controller
        assert np.allclose(z[:, j], ts.beta_density(c["alpha_before"], c["beta_before"]), rtol=1e-5)
    mean = by_name(fig, "posterior mean α/(α + β)")
    expected = [r.controller["alpha_before"] / (r.controller["alpha_before"] + r.controller["beta_before"])
                for r in beta_trace.rounds]
    assert list(mean.y) == pytest.approx(expected)
    assert list(mean.y) != pytest.approx([0.5] * len(expected))  # the posterior moved: the check can fail
    assert list(by_name(fig, "drafted tokens (realised draft length)").y) == [k for k, _ in PLAN]
    assert list(by_name(fig, "accepted drafts").y) == [a for _, a in PLAN]
    assert len(by_name(fig, "sampled θ (one per draft step)").x) == sum(k for k, _ in PLAN)
    assert [s.x0 for s in fig.layout.shapes if s.type == "line" and s.x0 == s.x1] == [3, 3]  # round 3 marked
    assert fig.layout.yaxis.title.text == "θ (probability)" and fig.layout.xaxis2.title.text == "round"
    assert fig.layout.yaxis2.title.text == "tokens"
    assert all(d.hovertemplate for d in fig.data)


def test_cali_posterior_is_the_first_steps_gaussian(cali_trace):
    fig = ts.posterior_figure(cali_trace, 0)
    z = np.asarray(by_name(fig, "posterior density").z, dtype=float)
    r = cali_trace.rounds[1]
    assert np.allclose(z[:, 1], ts.gaussian_density(r.controller["mu"][0], r.controller["sigma"][0]), rtol=1e-5)
    assert np.isnan(z[:, 2]).all()  # round 3 drafted nothing: no μ, no σ, a gap
    mean = by_name(fig, "posterior mean μ (first draft step)")
    assert mean.y[1] == pytest.approx(r.controller["mu"][0]) and mean.y[2] is None


# -- TS decisions ------------------------------------------------------------------------------------


def test_decisions_show_the_selected_rounds_thetas_stops_and_fates(beta_trace):
    r = beta_trace.rounds[0]  # drafted 3, accepted 1: accepted, rejected, discarded
    fig = ts.decisions_figure(beta_trace, 0)
    bars = {d.name: d for d in fig.data if d.type == "bar"}
    assert set(bars) == {f"sampled θ · token {f}" for f in ("accepted", "rejected", "discarded")}
    shown = sorted((x, y) for d in bars.values() for x, y in zip(d.x, d.y))
    assert shown == list(zip([1, 2, 3], r.controller["theta"]))
    for fate, steps in (("accepted", [1]), ("rejected", [2]), ("discarded", [3])):
        assert list(bars[f"sampled θ · token {fate}"].x) == steps
        assert bars[f"sampled θ · token {fate}"].marker.color == viz.style.FATE_COLOURS[fate]
    assert list(by_name(fig, "continue drafting (χ = 1)").x) == [1, 2]
    assert list(by_name(fig, "stop drafting (χ = 0)").x) == [3]
    mean = r.controller["alpha_before"] / (r.controller["alpha_before"] + r.controller["beta_before"])
    assert list(by_name(fig, f"posterior mean α/(α + β) = {mean:.3f}").y) == pytest.approx([mean, mean])
    c = r.controller
    assert (f"Beta({c['alpha_before']:.2f}, {c['beta_before']:.2f}) → Beta({c['alpha_after']:.2f}, "
            f"{c['beta_after']:.2f}) after r = {c['r']} of n = {c['n']}") in texts(fig)
    later = ts.decisions_figure(beta_trace, 4).data  # another round: another posterior mean
    c4 = beta_trace.rounds[4].controller
    assert c4["alpha_before"] / (c4["alpha_before"] + c4["beta_before"]) != pytest.approx(mean)
    assert [d for d in later if d.name.startswith("posterior mean")][0].y[0] == pytest.approx(
        c4["alpha_before"] / (c4["alpha_before"] + c4["beta_before"]))
    assert fig.layout.xaxis.title.text.startswith("draft step") and fig.layout.yaxis.title.text.startswith("θ")


def test_a_round_that_hit_the_cap_has_no_stop_and_says_so(beta_trace):
    fig = ts.decisions_figure(beta_trace, 1)  # drafted γ = 4, all continued, all accepted
    assert list(by_name(fig, "continue drafting (χ = 1)").x) == [1, 2, 3, 4]
    assert not [d for d in fig.data if d.name == "stop drafting (χ = 0)"]
    assert "γ = 4 cap" in texts(fig)
    assert {d.name for d in fig.data if d.type == "bar"} == {"sampled θ · token accepted"}


def test_cali_decisions_show_mu_sigma_and_the_model_score(cali_trace):
    r = cali_trace.rounds[5]
    fig = ts.decisions_figure(cali_trace, 5)
    mu = by_name(fig, "posterior mean μ ± σ (eq. 6–7)")
    assert list(mu.y) == pytest.approx(r.controller["mu"])
    assert list(mu.error_y.array) == pytest.approx(r.controller["sigma"])
    assert list(by_name(fig, "θ_M, the model's prediction (eq. 5)").y) == pytest.approx(r.controller["theta_model"])
    assert "(eq. 10)" in texts(fig)


# -- calibration -------------------------------------------------------------------------------------


def test_calibration_plots_mu_between_the_model_and_theta_hat(cali_trace):
    fig = ts.calibration_figure(cali_trace, 3)
    firsts = [r.controller["mu"][0] if r.controller["mu"] else None for r in cali_trace.rounds]
    assert list(by_name(fig, "μ, posterior mean (eq. 6)").y) == pytest.approx(firsts)
    assert list(by_name(fig, "θ̂, observed continue rate (eq. 10)").y) == pytest.approx(
        [r.controller["theta_hat"] for r in cali_trace.rounds])
    weight = by_name(fig, "w implied by the trace, (μ − θ̂)/(θ_M − θ̂)")
    sigma_m, sigma_s = 0.2, 0.5  # cali_controller's defaults: eq. 6's weight falls as n grows
    for r, w in zip(cali_trace.rounds, weight.y):
        if w is not None:
            n = r.controller["n"]
            assert w == pytest.approx(sigma_s ** 2 / (n * sigma_m ** 2 + sigma_s ** 2))
    assert sum(w is not None for w in weight.y) >= 3
    assert fig.layout.yaxis.title.text == "θ (probability)"


# -- edge cases --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["beta-ts", "cali-ts"])
def test_one_round_and_empty_rounds_never_crash(kind):
    one = make_trace(kind, [(2, 1)])
    for view in views_for(one):
        if view.name in TS_VIEWS:
            view.render(one, 0)
            view.render(one, 99)  # out of range: clamps to the last round
    empty = make_trace(kind, [(0, 0), (0, 0)])
    for render in (ts.posterior_figure, ts.decisions_figure) + ((ts.calibration_figure,) if kind == "cali-ts" else ()):
        fig = render(empty, 1)
        if render is ts.decisions_figure or kind == "cali-ts":
            assert "sampled no θ" in texts(fig) or "never" in texts(fig), render.__name__
    mixed = make_trace(kind, [(0, 0), (3, 3)])
    assert "drafted nothing" in texts(ts.decisions_figure(mixed, 0))
    assert len(by_name(ts.decisions_figure(mixed, 1), "continue drafting (χ = 1)").x) == 2


def test_a_ts_trace_survives_the_json_round_trip(beta_trace):
    back = RunTrace.from_json(beta_trace.to_json())
    assert back.rounds[0].controller == beta_trace.rounds[0].controller
    assert views_for(back) and ts.posterior_figure(back, 0).data


# -- summary (EESD Appendix D) -----------------------------------------------------------------------


def test_summary_shows_eesd_metrics_with_their_meaning_when_present():
    trace = make_trace("beta-ts", PLAN, v_d=0.5, r_d=0.4, hm=2 * 0.5 * 0.4 / 0.9, eq14_speedup=1.37)
    text = viz.run_summary(trace)
    assert "HM</abbr> 0.44" in text and "v_d</abbr> 0.50" in text and "r_d</abbr> 0.40" in text
    assert "×1.37" in text and "eq. 11" in text and "harmonic mean" in text
    plain = viz.run_summary(make_trace("beta-ts", PLAN))
    assert "HM</abbr>" not in plain and "v_d</abbr>" not in plain and "eq. 14" not in plain
    partial = viz.run_summary(make_trace("beta-ts", PLAN, v_d=0.0, r_d=0.0, hm=None, eq14_speedup=None))
    assert "v_d</abbr> 0.00" in partial and "HM" not in partial  # zero is a value, None is absent
    undefined = viz.run_summary(make_trace("beta-ts", PLAN, v_d=0.0, r_d=0.0, hm=0.0, eq14_speedup=float("nan")))
    assert "HM</abbr> 0.00" in undefined and "nan" not in undefined and "eq. 14" not in undefined
