"""One rule for text that goes into Plotly (#42 item 5, #40 item 6): every figure, of every view, shows a stranger's
text as typed. Plotly draws a subset of HTML in the text it renders (``<b>``, ``<br>``, ``<a href>``, …) and decodes
only ``&amp;``, ``&lt;``, ``&gt;`` (and a few more named) and numeric entities, so ``html.escape``'s ``&quot;`` showed
literally in beam's pruned candidates and the What-if legend, and a raw label's ``<b>`` would be drawn bold.

Here every method is run on the tiny random models, every token's text and every free-text field is replaced by
a hostile string, every figure is built, and each of its strings is rendered the way Plotly renders it
(``rendered``): no entity may survive as text, the hostile string must show whole where it shows at all, and none
of its markup may be left to Plotly."""

from __future__ import annotations

import dataclasses
import re

import pytest

import explorer
from explorer import viz
from explorer.artifacts import ASSETS
from explorer.viz.views import discover

HOSTILE = "a\"<b>&'"  # a quote, a tag Plotly draws, an ampersand, an apostrophe
PROMPT = [3, 4, 5, 3, 4, 5, 3, 4]
# every method on the tiny models (the ones a tiny model runs without trained parts: their drafts untrained)
RUNS = {
    "ar": {}, "speculative": {"draft": "model:tiny-random:2:1"}, "bild": {"draft": "model:tiny-random:2:1"},
    "bita": {}, "suffix": {}, "lookahead": {}, "lenient": {"draft": "model:tiny-random:2:1", "lenience": 0.5},
    "hierarchical": {"draft": "model:tiny-random:2:1>model:tiny-random:3:2"},
    "beam": {"draft": "model:tiny-random:2:1"}, "beam-004": {"method": "beam", "draft": "model:tiny-random:2:1",
                                                             "beam_rule": "004"},
    "synthetic": {}, "quantized": {}, "quantized-alone": {"method": "quantized", "quantized_role": "alone"},
    "eagle-tree": {"eagle_head": "untrained"},
    "cost-aware": {"method": "speculative", "draft": "prompt-lookup:2", "controller": "cost-aware"},
    "eesd-like": {"method": "speculative", "draft": "early-exit:1", "controller": "beta-ts"},
    "cali-ts": {"method": "speculative", "draft": "early-exit:1", "controller": "cali-ts"},
    "feature-head": {"method": "speculative", "draft": "feature-head:untrained"},
    "dynamic": {"method": "speculative", "draft": "model:tiny-random:2:1", "controller": "dynamic-gamma"},
}
# Plotly's svg_text_utils: the tags it draws, and the named entities it decodes
TAGS = re.compile(r"</?(b|i|em|sup|sub|s|u|br|span|a|extra)(\s[^<>]*)?/?>", re.I)
NAMED = {"amp": "&", "lt": "<", "gt": ">", "nbsp": "\u00a0", "mu": "μ", "times": "×", "plusmn": "±", "deg": "°"}


def rendered(text: str) -> str:
    """What Plotly shows of ``text``: its tags drawn (dropped here), then its entities decoded as Plotly does."""
    text = TAGS.sub("", text)

    def entity(m):
        name = m.group(1)
        if name.startswith("#"):
            return chr(int(name[2:], 16) if name[1:2] in "xX" else int(name[1:]))
        return NAMED.get(name, m.group(0))

    return re.sub(r"&(#[xX]?[0-9a-fA-F]+|[a-zA-Z]+);", entity, text)


def strings(value):
    """Every string anywhere in a figure's JSON."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings(v)


def hostile(trace):
    """``trace`` with every token's text and every free-text field a stranger could have written made hostile
    (the draft keeps its kind, which the views read, and gains the hostile text; so does a controller's
    evidence)."""
    rounds = tuple(dataclasses.replace(r, controller={**r.controller, "evidence": HOSTILE})
                   if "evidence" in r.controller else r for r in trace.rounds)
    return dataclasses.replace(trace, token_text={k: HOSTILE for k in trace.token_text}, model=f"m{HOSTILE}",
                               draft=f"{trace.draft}:{HOSTILE}" if trace.draft else None, prompt=HOSTILE,
                               rounds=rounds)


@pytest.fixture(scope="module")
def traces(tiny_target):
    out = {}
    for name, options in RUNS.items():
        options = dict(options)
        method = options.pop("method", name)
        out[name] = hostile(explorer.decode(tiny_target, prompt_ids=PROMPT, method=method, max_new_tokens=12,
                                            **options))
    return out


def rounds_of_every_kind(trace) -> list[int]:
    """The rounds a figure can draw differently: the first of each kind (its event, whether it was refused, drafted
    nothing, and which method details and controller facts it carries) and the last. Two rounds of one kind put the
    same strings in a figure (every token's text is the one hostile string), and drawing every view at every round
    of 19 runs was 500 figures, the file's whole time (≈ 17 s of CI's run)."""
    first = {}
    for r in trace.rounds:
        kind = (r.event, r.rejected_at is None, bool(r.drafted), tuple(sorted(r.detail)), tuple(sorted(r.controller)))
        first.setdefault(kind, r.index)
    return sorted(set(first.values()) | {len(trace.rounds) - 1})


def figures(traces):
    """Every Plotly figure the page draws from these traces: the Watch tab's, the theory, every plot view at
    every kind of round, the audit, Compare (a report of hostile names) and What if (hostile labels)."""
    from explorer.audit import chi_square, SamplingAudit
    from explorer.viz.audit import sampling_audit_figure
    from explorer.viz.compare import compare_figure
    from explorer.viz.whatif import whatif_figure
    from explorer import whatif

    plain = traces["ar"]
    for name, trace in traces.items():
        yield f"{name}: latency", viz.latency_figure(trace, plain)
        yield f"{name}: theory", viz.theory_figure(0.8, 0.1, 0.1, trace, plain)
        for i in rounds_of_every_kind(trace):
            yield f"{name}: round {i + 1}", viz.round_detail_figure(trace, i)
            for view in viz.views_for(trace):
                if view.kind == "plot":
                    yield f"{name}: {view.name} at round {i + 1}", view.render(trace, i)
    chi2, dof, p, bins, impossible = chi_square({3: 6, 4: 4}, {3: 0.6, 4: 0.4}, 10)
    audit = SamplingAudit(10, 1.0, chi2, dof, p, bins, impossible, {"accepted": 10}, {3: HOSTILE, 4: HOSTILE + "2"})
    yield "audit", sampling_audit_figure(audit)
    rows = [{"system": f"speculative:{HOSTILE}", "tokens_per_s": 9.0, "speedup_vs_ar": 1.2},
            {"system": f"x{HOSTILE}" * 4, "tokens_per_s": 9.0, "speedup_vs_ar": 1.1}]
    yield "compare", compare_figure({"rows": rows, "meta": {"model": f"m{HOSTILE}"}})
    text = (ASSETS / "whatif" / "vllm-metrics-example.txt").read_text(encoding="utf-8")
    text = text.replace('model_name="', 'model_name="' + HOSTILE.replace('"', '\\"'))  # Prometheus escapes its quotes
    yield "what if", whatif_figure(whatif.analyse_all(whatif.read(text, name=f"n{HOSTILE}"))["drafters"])


def test_every_figure_shows_a_strangers_text_as_typed(traces):
    seen, problems = 0, []
    views_drawn = set()
    for where, fig in figures(traces):
        views_drawn.add(where.split(": ")[1].split(" at round")[0] if ": " in where else where)
        for raw in strings(fig.to_plotly_json()):
            shown = rendered(raw)
            if re.search(r"&(#[xX]?[0-9a-fA-F]+|[a-zA-Z]+);", shown):
                problems.append(f"{where}: an entity shows as text in {shown[:80]!r}")
            if "<b>&" in raw or "<b>&amp;" in raw:
                problems.append(f"{where}: the stranger's <b> is left to Plotly in {raw[:80]!r}")
            if "a\"" in shown and HOSTILE not in shown and "…" not in shown:
                problems.append(f"{where}: the stranger's text is changed in {shown[:80]!r}")
            seen += HOSTILE in shown
    assert not problems, problems[:20]
    assert seen > 50  # the hostile text does show, in many places
    plot_views = {v.name for v in discover() if v.kind == "plot"}
    assert plot_views <= views_drawn, f"views no run here drew: {sorted(plot_views - views_drawn)}"
