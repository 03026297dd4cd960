"""BiLD's views from a saved trace (no model): producers, markers and flushed tokens; the sweep figure."""

import re
from pathlib import Path

import explorer
from explorer.viz.views import bild, note_for, views_for

TRACE = explorer.load_trace((Path(__file__).parent / "data" / "trace_bild.json").read_text())


def test_token_view_colours_by_model_and_strikes_rollbacks():
    last = len(TRACE.rounds) - 1
    page = bild.bild_tokens_html(TRACE, last)
    small = sum(k == "accepted" for r in TRACE.rounds for k in r.emitted_kind)
    large = sum(k != "accepted" for r in TRACE.rounds for k in r.emitted_kind)
    assert len(re.findall(r'class="bild-tok bild-small[^"]*" data-round', page)) == small
    assert len(re.findall(r'class="bild-tok bild-large[^"]*" data-round', page)) == large
    rollbacks = [r for r in TRACE.rounds if r.event == "rollback"]
    assert rollbacks and len(re.findall(r'<s class="bild-flushed[^"]*" data-round', page)) == len(rollbacks) == page.count("⟲</span>")
    fallbacks = sum(r.detail["reason"] == "confidence" and r.event == "fallback" for r in TRACE.rounds)
    assert page.count("▸</span>") == fallbacks
    assert f"{small} of {small + large} tokens by the small model" in page
    first = bild.bild_tokens_html(TRACE, 0)  # only the first round so far
    assert first.count('class="bild-tok') == len(TRACE.rounds[0].emitted) + 2  # + the two legend swatches


def test_events_figure_has_thresholds_and_labelled_axes():
    fig = bild.bild_events_figure(TRACE, 2)
    assert fig.layout.title.text.startswith("BiLD")
    assert fig.layout.yaxis.title.text == "probability" and fig.layout.yaxis2.title.text == "−log p_L (nats)"
    assert fig.layout.xaxis2.title.text == "round"
    rollbacks = [r for r in TRACE.rounds if r.event == "rollback"]
    assert len(fig.data[1].x) == len(rollbacks)
    texts = [a.text for a in fig.layout.annotations]
    assert any("α_FB = 0.5" in t for t in texts) and any("α_RB = 3.0" in t for t in texts)


def test_views_register_for_bild_only_and_the_note_says_lossy():
    names = {v.name for v in views_for(TRACE)}
    assert {"bild-tokens", "bild-events"} <= names
    ar = explorer.load_trace((Path(__file__).parent / "data" / "trace_ar.json").read_text())
    assert not {"bild-tokens", "bild-events"} & {v.name for v in views_for(ar)}
    assert "lossy" in note_for("bild").text and TRACE.settings.lossy  # an @1 file: lossy from the record


def test_sweep_figure_draws_one_curve_per_rollback_threshold_and_the_front():
    points = [
        {"fallback_threshold": fb, "rollback_threshold": rb, "agreement": a, "rouge_l": a, "speedup_vs_ar": 1.0,
         "large_forwards_per_token": f, "pareto": pareto}
        for fb, rb, a, f, pareto in [(0.2, 1.0, 0.9, 0.5, True), (0.8, 1.0, 0.95, 0.9, True),
                                     (0.2, None, 0.4, 0.3, True), (0.8, None, 0.5, 0.8, False)]
    ]
    fig = bild.sweep_figure({"points": points})
    names = [d.name for d in fig.data]
    assert names == ["Pareto front", "α_RB = 1", "α_RB = ∞ (no rollback)"]  # the front beneath the curves
    assert list(fig.data[0].x) == [0.3, 0.5, 0.9]
    # coinciding curves stay told apart: each its own colour, marker shape and dash
    curves = fig.data[1:]
    for attr in (lambda d: d.line.color, lambda d: d.marker.symbol, lambda d: d.line.dash):
        assert len({attr(d) for d in curves}) == len(curves)
    assert "forwards per token" in fig.layout.xaxis.title.text and "agreement" in fig.layout.yaxis.title.text
