"""EESD's Thompson-sampling views (section 3.3, Appendix B) and the Appendix D metrics in the summary,
from hand-built traces whose ``controller`` dicts follow the engine's contract (``helpers.make_trace``, no model)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import load, make_trace

from explorer import viz
from explorer.trace import read_json
from explorer.viz.views import ts, views_for

TS_VIEWS = {"ts-posterior", "ts-round-decisions", "ts-theta-calibration"}


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
        other = load(name)
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
            f"{c['beta_after']:.2f}) after {c['r']} of {c['n']} draft steps went right (r of n") in texts(fig)
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
    assert "how often drafting went on so far" in texts(fig) and "(θ̂, eq. 10)" in texts(fig)  # words first (#48)


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
    back = read_json(beta_trace.to_json())
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
