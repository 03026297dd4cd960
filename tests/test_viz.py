"""The views of a trace, built from the saved traces in tests/data (no model; the ``ar`` and ``lookup``
fixtures are in conftest.py)."""

from __future__ import annotations

import ast
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from helpers import load

import explorer
from explorer import theory, viz
from explorer.viz import views
from explorer.viz.tokens import FATES

VIZ = Path(explorer.__file__).parent / "viz"


@pytest.fixture(scope="module")
def sampled():
    return load("sampled_tiny")


@pytest.fixture(scope="module")
def all_traces(ar, lookup, sampled):
    return [ar, lookup, sampled]


class Spans(HTMLParser):
    """Every element's classes and attributes in document order, and the text inside token spans."""

    def __init__(self):
        super().__init__()
        self.elements = []
        self.token_text = []
        self._in_token = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = set((attrs.get("class") or "").split())
        self.elements.append((tag, classes, attrs))
        self._in_token = "tok" in classes

    def handle_endtag(self, tag):
        self._in_token = False

    def handle_data(self, data):
        if self._in_token:
            self.token_text.append(data)


def parse(html: str) -> list:
    parser = Spans()
    parser.feed(html)
    return parser.elements


def tokens_of(html: str) -> list:
    return [(classes, attrs) for _, classes, attrs in parse(html) if "tok" in classes]


def expected_counts(r) -> dict:
    """The fates a round must show, from its fields alone."""
    rejected = int(r.rejected_at is not None and r.n_accepted <= r.rejected_at < len(r.drafted))
    counts = dict.fromkeys(FATES, 0)
    counts["accepted"] = r.n_accepted
    counts["rejected"] = rejected
    counts["discarded"] = len(r.drafted) - r.n_accepted - rejected
    for kind in r.emitted_kind[r.n_accepted:]:
        counts[kind] += 1
    return counts


# -- the rule: no torch, no gradio in viz -------------------------------------------------------------


def test_viz_imports_neither_torch_nor_gradio():
    for path in VIZ.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in {"torch", "gradio"}, f"{path.name} imports {name}"


# -- token view ---------------------------------------------------------------------------------------


def test_round_fates_match_the_round_fields(all_traces):
    for trace in all_traces:
        for r in trace.rounds:
            assert viz.fate_counts(r) == expected_counts(r), (trace.method, r.index)


def test_sampled_round_zero_fates_in_order(sampled):
    fates = viz.round_fates(sampled.rounds[0])  # drafted 4: 1 accepted, rejected at #2, corrected
    assert [f.fate for f in fates] == ["accepted", "rejected", "discarded", "discarded", "corrected"]
    assert fates[0].u == pytest.approx(sampled.rounds[0].uniforms[0])
    assert fates[1].u == pytest.approx(sampled.rounds[0].uniforms[1])
    assert fates[1].p / fates[1].q < fates[1].u  # why it was rejected: u > p/q
    corrected = fates[-1]
    assert corrected.token_id == sampled.rounds[0].emitted[-1] and corrected.p == pytest.approx(sampled.rounds[0].p_emitted[-1])
    # its residual probability is known only when it is among the residual's top 5 (here it is not)
    assert corrected.residual == dict(sampled.rounds[0].residual_top).get(corrected.token_id)


@pytest.mark.parametrize("name", ["ar", "prompt_lookup", "sampled_tiny"])
def test_token_html_classes_and_counts_for_every_round(name):
    trace = load(name)
    for index, r in enumerate(trace.rounds):
        toks = tokens_of(viz.token_html(trace, index))
        current = [c for c, _ in toks if "tok-current" in c]
        past = [c for c, _ in toks if "tok-past" in c]
        assert len(past) == sum(len(x.emitted) for x in trace.rounds[:index])
        assert len(current) + len(past) == len(toks)
        for classes, _ in toks:
            assert len(classes & {f"tok-{f}" for f in FATES}) == 1, classes
        counts = {f: sum(f"tok-{f}" in c for c in current) for f in FATES}
        assert counts == expected_counts(r), (name, index)
        assert {a["data-round"] for c, a in toks if "tok-current" in c} == {str(r.index)}


def test_token_html_tooltips_carry_q_p_and_u(sampled, lookup):
    toks = tokens_of(viz.token_html(sampled, 0))
    titles = {next(f for f in FATES if f"tok-{f}" in c): a["data-tip"] for c, a in toks}
    assert all("title" not in a for c, a in toks)  # the page's own tooltip, not the browser's slow one
    assert "q = 0.033" in titles["accepted"] and "p = 0.095" in titles["accepted"] and "u = 0.954" in titles["accepted"]
    assert "u > p/q" in titles["rejected"]
    assert "never tested" in titles["discarded"]
    assert "residual" in titles["corrected"]
    greedy = tokens_of(viz.token_html(lookup, 0))
    rejected = next(a["data-tip"] for c, a in greedy if "tok-rejected" in c)
    assert "q = 1.000" in rejected and "argmax" in rejected and "u =" not in rejected


def test_ar_tokens_are_all_target_and_spell_the_output(ar):
    html = viz.token_html(ar, len(ar.rounds) - 1)
    toks = tokens_of(html)
    assert len(toks) == len(ar.output_ids)
    assert all("tok-target" in c for c, _ in toks)
    parser = Spans()
    parser.feed(html)
    shown = "".join(parser.token_text).replace("↵\n", "\n")
    assert shown == "".join(ar.token_text[t] for t in ar.output_ids)
    assert "Red is the most fundamental colour" in shown


def test_legend_and_prompt_never_use_the_tok_class(sampled):
    elements = parse(viz.token_html(sampled, 3))
    swatches = [c for _, c, _ in elements if "swatch" in c]
    assert len(swatches) == len(FATES) - 1  # every fate but the low-bit copy's own (its runs have no other)
    assert not any("tok" in c for c in swatches)
    prompt = [c for _, c, _ in elements if "tok-prompt" in c]
    assert prompt and not any("tok" in c for c in prompt)


def test_token_html_escapes_text_and_clamps_the_round(sampled):
    weird = sampled.token_text | {0: "<b>&"}
    trace = type(sampled)(**{**sampled.__dict__, "token_text": weird})
    html = viz.token_html(trace, 999)
    assert "<b>&" not in html and "&lt;b&gt;&amp;" in html
    assert {a["data-round"] for c, a in tokens_of(html) if "tok-current" in c} == {str(len(sampled.rounds) - 1)}


# -- round detail -------------------------------------------------------------------------------------


def axis_titles(fig, prefix: str) -> list[str]:
    layout = fig.to_plotly_json()["layout"]
    return [v.get("title", {}).get("text") for k, v in layout.items()
            if k.startswith(prefix) and isinstance(v, dict) and v.get("visible", True)]


def assert_well_labelled(fig):
    layout = fig.to_plotly_json()["layout"]
    assert layout["title"]["text"]
    assert all(axis_titles(fig, "xaxis")), axis_titles(fig, "xaxis")
    assert any(axis_titles(fig, "yaxis"))
    for trace in fig.data:
        assert trace.hovertemplate, f"{trace.name} has no hover text"


def test_round_detail_shows_the_residual_at_a_sampled_rejection(sampled):
    r = sampled.rounds[0]
    fig = viz.round_detail_figure(sampled, 0)
    assert_well_labelled(fig)
    residual = [t for t in fig.data if t.name.startswith("residual")]
    assert len(residual) == 1
    shown = dict(zip(residual[0].y, residual[0].x))
    for token, prob in r.residual_top:
        label = next(lbl for lbl in shown if lbl.lstrip("▸ ").startswith(repr_label(sampled, token)))
        assert shown[label] == pytest.approx(prob)
    titles = [a.text for a in fig.layout.annotations]
    assert len(titles) == len(r.drafted) + 1
    assert "✓ accepted" in titles[0] and "✗ rejected" in titles[1] and "discarded" in titles[2]
    assert titles[-1].startswith("residual at #2")


def repr_label(trace, token):
    return "'" + trace.token_text[token].replace("\n", "↵") + "'"


def test_round_detail_draws_p_and_q_for_each_drafted_position(sampled):
    r = sampled.rounds[0]
    panels = viz.round_panels(sampled, 0)
    for i, panel in enumerate(panels[: len(r.drafted)]):
        assert panel.chosen == r.drafted[i] and panel.candidates[0] == r.drafted[i]
        assert panel.series["q (draft)"][r.drafted[i]] == pytest.approx(r.q_drafted[i])
        assert panel.series["p (target)"][r.drafted[i]] == pytest.approx(r.p_drafted[i])


def test_round_detail_greedy_rejection_has_no_residual(lookup):
    fig = viz.round_detail_figure(lookup, 0)
    assert not [t for t in fig.data if t.name.startswith("residual")]
    assert "greedy" in fig.layout.annotations[-1].text


def test_round_detail_bonus_and_target_rounds(sampled, ar):
    bonus = next(r.index for r in sampled.rounds if r.event == "all-accepted")
    assert "bonus" in viz.round_detail_figure(sampled, bonus).layout.annotations[-1].text
    fig = viz.round_detail_figure(ar, 3)
    assert len(fig.layout.annotations) == 1 and "target" in fig.layout.annotations[0].text
    assert [t.name for t in fig.data] == ["p (target)"]


# -- latency ------------------------------------------------------------------------------------------


def test_latency_figure_stacks_each_rounds_time(lookup, ar):
    fig = viz.latency_figure(lookup, ar)
    assert_well_labelled(fig)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [b.name for b in bars] == ["draft (ms)", "verify (ms)", "other (ms)"]
    assert list(bars[1].y) == pytest.approx([r.timing.verify_s * 1000 for r in lookup.rounds])
    assert fig.layout.barmode == "stack"
    assert "time (ms)" in axis_titles(fig, "yaxis") and "throughput (tokens/s)" in axis_titles(fig, "yaxis")
    ours, base = [t for t in fig.data if t.type == "scatter"]
    assert ours.y[-1] == pytest.approx(lookup.summary.new_tokens / sum(r.timing.total_s for r in lookup.rounds))
    assert base.line.dash == "dash" and base.x[-1] == ar.summary.new_tokens
    speedup = lookup.summary.tokens_per_s / ar.summary.tokens_per_s
    assert viz.measured_speedup(lookup, ar) == pytest.approx(speedup)
    assert f"×{speedup:.2f}" in fig.layout.title.text


def test_latency_without_a_baseline_says_so(lookup):
    fig = viz.latency_figure(lookup, None)
    assert "not measured yet" in fig.layout.title.text
    assert viz.latency_figure(None).layout.title.text  # placeholder still titled


# -- theory -------------------------------------------------------------------------------------------


def test_theory_curves_match_explorer_theory():
    fig = viz.theory_figure(0.7, 0.2, 0.3)
    assert_well_labelled(fig)
    speed = next(t for t in fig.data if t.name.startswith("Thm 3.8"))
    gammas = np.asarray(speed.x)
    assert list(gammas) == list(range(1, 17))
    assert np.allclose(speed.y, theory.speedup(0.7, gammas, 0.2))
    star = next(t for t in fig.data if t.name.startswith("optimal γ ="))
    assert star.x[0] == theory.optimal_gamma(0.7, 0.2, max_gamma=16)
    ops = next(t for t in fig.data if t.name.startswith("Thm 3.11"))
    assert np.allclose(ops.y, theory.operations_factor(0.7, gammas, 0.3))
    curves = [t for t in fig.data if t.legendgroup == "optimal"]
    assert len(curves) == 5  # 0.2 is one of the default cost ratios
    for curve in curves:
        c = float(curve.name.split("=")[1].split()[0])
        for a, g in list(zip(curve.x, curve.y))[::17]:
            assert g == theory.optimal_gamma(a, c, max_gamma=32)
    assert {"speedup over autoregressive (×)", "optimal γ (tokens)", "operations (× autoregressive)"} <= set(axis_titles(fig, "yaxis"))
    log_axis = fig.layout.yaxis2  # optimal γ: its own ticks, every curve's values within them
    assert log_axis.type == "log" and list(log_axis.tickvals) == [1, 2, 4, 8, 16, 32, 64]
    assert list(log_axis.ticktext) == ["1", "2", "4", "8", "16", "32", "64"]
    assert max(max(curve.y) for curve in curves) <= 64


def test_theory_places_the_run_with_predicted_and_measured_speedup(lookup, ar):
    fig = viz.theory_figure(0.8, 0.1, 0.1, lookup, ar)
    s = lookup.summary
    predicted = next(t for t in fig.data if t.name.startswith("predicted"))
    assert predicted.x[0] == pytest.approx(s.mean_gamma) and predicted.y[0] == pytest.approx(s.predicted_speedup)
    measured = next(t for t in fig.data if t.name.startswith("measured"))
    assert measured.y[0] == pytest.approx(viz.measured_speedup(lookup, ar))
    run_curve = next(t for t in fig.data if t.name.startswith("this run"))
    assert np.allclose(run_curve.y, theory.speedup(s.alpha_hat, np.asarray(run_curve.x), s.c_measured))
    assert f"α̂={s.alpha_hat:.2f}" in fig.layout.title.text and "measured" in fig.layout.title.text


def test_theory_for_an_ar_run_has_nothing_to_place(ar):
    fig = viz.theory_figure(0.8, 0.1, 0.1, ar, ar)
    assert "no α̂" in fig.layout.title.text
    assert not [t for t in fig.data if t.name.startswith(("predicted", "measured"))]


# -- method views and notes ---------------------------------------------------------------------------


def test_method_views_are_found_and_filtered_by_trace(ar, sampled):
    names = {v.name for v in views.discover()}
    assert {"acceptance", "controller"} <= names
    assert "acceptance" not in {v.name for v in views.views_for(ar)}
    assert "acceptance" in {v.name for v in views.views_for(sampled)}
    assert views.views_for(None) == []
    for view in views.views_for(sampled):
        assert_well_labelled(view.render(sampled, 4))


def test_a_new_method_plugs_in_with_one_registration(sampled):
    view = views.MethodView("test-rounds", "Rounds", lambda t: t.method == "speculative",
                            lambda t, i: f"<p>round {i + 1} of {len(t.rounds)}</p>", kind="html")
    try:
        views.register(view)
        views.register_note("speculative", "A test note.")
        assert view in views.views_for(sampled)
        banner = viz.method_banner("speculative", explorer.METHODS["speculative"], lossy=True)
        assert "A test note." in banner and "Lossy method" in banner and "lossy" in banner
    finally:
        views.VIEWS.pop("test-rounds", None)
        views.NOTES.pop("speculative", None)
    assert "Lossy" not in viz.method_banner("speculative", explorer.METHODS["speculative"])


def test_run_summary_reports_speed_acceptance_and_speedups(lookup, ar):
    text = viz.run_summary(lookup, ar)
    # Names pass safe_markdown: Markdown punctuation arrives backslash-escaped and renders as typed.
    assert "prompt\\-lookup:3" in text and "tokens/s" in text and "α̂</abbr> 0.18" in text
    # the theorem priced as "Why this speed" prices it (#48); the run's own c is not shown beside it
    assert "predicted</abbr> ×0.97" in text and "measured ×" in text and "end of sequence" in text
    assert "c per verification" not in text


def test_a_run_opens_on_its_first_refusal_and_steps_between_refusals(ar, lookup, sampled):
    for trace in (lookup, sampled):
        refused = [r.index for r in trace.rounds if r.rejected_at is not None]
        assert refused and viz.opening_round(trace) == refused[0]
        assert viz.next_refusal(trace, refused[0]) == (refused[1] if len(refused) > 1 else refused[0])
        assert viz.next_refusal(trace, refused[-1]) == refused[0]  # from the start again after the last
    assert viz.opening_round(ar) == len(ar.rounds) - 1 and viz.next_refusal(ar, 0) is None  # nothing refused


def test_the_white_template_is_assigned_unchecked_and_draws_the_same_figure():
    """``style.white_template`` skips plotly's check of the registered template (13 ms a figure): the figure it
    makes is, as data, the one ``update_layout(template="plotly_white")`` makes, and it owns its copy (changing
    one figure's template changes neither the registry's nor another figure's)."""
    import json

    import plotly.graph_objects as go
    import plotly.io as pio

    from explorer.viz.style import base_layout

    fast, other = base_layout(go.Figure(), "a title", 300), base_layout(go.Figure(), "a title", 300)
    checked = base_layout(go.Figure(), "a title", 300)
    checked.update_layout(template="plotly_white")  # the checked way, over the same layout
    assert json.loads(fast.to_json()) == json.loads(checked.to_json())
    fast.layout.template.layout.paper_bgcolor = "red"
    assert pio.templates["plotly_white"].layout.paper_bgcolor == "white"
    assert other.layout.template.layout.paper_bgcolor == "white"
    with pytest.raises(ValueError):  # the layout checks what is set on it afterwards again
        fast.layout.height = "tall"


def test_a_long_panel_title_goes_on_two_lines(sampled):
    """Three panels a row leave a title about 30 characters before it reaches its neighbour's (CI, 2026-11-28:
    "target at #4 (greedy: its argmax) → ' Australia' ↻" ran into "draft #7 ' London' – discarded" beside it)."""
    from explorer.viz.rounds import TITLE_CHARS, _title

    assert _title("draft #1 ' the'", "✓ accepted") == "draft #1 ' the' ✓ accepted"
    long = _title("target at #4 (greedy: its argmax)", "→ ' Australia' ↻")
    assert long == "target at #4 (greedy: its argmax)<br>→ ' Australia' ↻"
    for r in range(len(sampled.rounds)):
        for panel in viz.round_detail_figure(sampled, r).layout.annotations:
            lines = panel.text.split("<br>")
            assert len(lines) <= 2 and (len(lines) == 2 or len(panel.text) <= TITLE_CHARS), panel.text
