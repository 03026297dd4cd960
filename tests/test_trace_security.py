"""Uploaded traces and benchmark reports are untrusted: every forged field is refused with one readable
line, the caps hold, and the largest trace allowed still draws quickly."""

import json
import re
import time
from pathlib import Path

import pytest

import explorer
from explorer import bench, limits, viz
from explorer.errors import ExplorerError
from explorer.tools.forged_traces import add_leaves, repeated
from explorer.ui.sections import load_bench_report
from explorer.viz.compare import compare_figure

DATA = Path(__file__).parent / "data"
NAN, INF = float("nan"), float("inf")
DELETE = object()  # a forgery that removes the field
# what a one-line message for a user must not contain
INTERNALS = re.compile(r"Traceback|File \"|\b[A-Z]\w*(Error|Exception)\b")


def one_line(message: str) -> str:
    assert "\n" not in message and not INTERNALS.search(message), message
    assert len(message) < 400, message  # user values are echoed cut short
    return message


def saved(name: str) -> dict:
    return json.loads((DATA / f"trace_{name}.json").read_text())


def decoded(controller: str) -> dict:
    return json.loads(explorer.decode("tiny-random:1", "hello there", method="speculative", draft="model:tiny-random:2",
                                      gamma=6, controller=controller, max_new_tokens=24, temperature=1.0,
                                      seed=1).to_json())


@pytest.fixture(scope="module")
def traces() -> dict[str, dict]:
    """Real traces as JSON data: a sampled speculative run, BiLD, BiTA and the adaptive controllers."""
    out = {name: saved(name) for name in ("sampled_tiny", "bild", "bita", "ar")}
    out.update({kind: decoded(kind) for kind in ("cali-ts", "beta-ts", "heuristic")})
    return out


def forge(data: dict, path: tuple, value) -> str:
    """The trace with the value at ``path`` replaced (or removed), as JSON text (NaN and Infinity as
    Python's json writes them)."""
    data = json.loads(json.dumps(data))
    *parents, last = path
    target = data
    for key in parents:
        target = target[key]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return json.dumps(data)


# (trace, path to the field, forged value, what the message names)
FORGERIES = [
    # probabilities: NaN, infinite, strings, outside [0, 1]
    ("sampled_tiny", ("rounds", 1, "q_drafted", 0), NAN, "q_drafted"),
    ("sampled_tiny", ("rounds", 1, "p_drafted", 2), "0.5", "p_drafted"),
    ("sampled_tiny", ("rounds", 1, "p_emitted", 0), INF, "p_emitted"),
    ("sampled_tiny", ("rounds", 1, "uniforms", 0), -0.1, "uniforms"),
    ("sampled_tiny", ("rounds", 1, "q_drafted", 0), 1.5, "q_drafted"),
    ("sampled_tiny", ("rounds", 1, "draft_top", 0, 0, 1), NAN, "draft_top"),
    ("sampled_tiny", ("rounds", 1, "target_top", 0, 0), ["a", 0.5], "target_top"),
    ("sampled_tiny", ("rounds", 1, "residual_top"), [[1, 2.0]], "residual_top"),
    ("sampled_tiny", ("rounds", 1, "draft_top", 0), [[1, 0.1]] * 100, "draft_top"),
    # timing
    ("sampled_tiny", ("rounds", 1, "timing", "verify_s"), -1.0, "verify_s"),
    ("sampled_tiny", ("rounds", 1, "timing", "draft_s"), "fast", "draft_s"),
    ("sampled_tiny", ("rounds", 1, "timing", "other_s"), NAN, "other_s"),
    # index and positions
    ("sampled_tiny", ("rounds", 1, "index"), "1", "index"),
    ("sampled_tiny", ("rounds", 1, "index"), -1, "index"),
    ("sampled_tiny", ("rounds", 1, "index"), 7, "index"),
    ("sampled_tiny", ("rounds", 1, "index"), NAN, "index"),
    ("sampled_tiny", ("rounds", 1, "rejected_at"), -1, "rejected_at"),
    ("sampled_tiny", ("rounds", 1, "rejected_at"), 40, "rejected_at"),
    ("sampled_tiny", ("rounds", 1, "context_len"), 1.5, "context_len"),
    ("sampled_tiny", ("rounds", 1, "event"), "<b>x</b>" * 1000, "event"),
    ("sampled_tiny", ("rounds", 1, "emitted_kind", 0), "evil", "emitted_kind"),
    ("sampled_tiny", ("rounds", 1, "drafted"), list(range(100)), "drafted"),
    # token ids and their text
    ("sampled_tiny", ("rounds", 1, "drafted", 0), -5, "drafted"),
    ("sampled_tiny", ("rounds", 1, "drafted", 0), 2**40, "drafted"),
    ("sampled_tiny", ("prompt_ids", 0), 10**30, "prompt_ids"),
    ("sampled_tiny", ("prompt_ids", 0), True, "prompt_ids"),
    ("sampled_tiny", ("token_text", "abc"), "x", "token_text"),
    ("sampled_tiny", ("token_text", "-1"), "x", "token_text"),
    ("sampled_tiny", ("token_text", "1"), 5, "token_text"),
    ("sampled_tiny", ("token_text", "1"), "x" * 10_000, "token_text"),
    ("sampled_tiny", ("token_text", "1"), "\ud800", "token_text"),
    # the run's own fields
    ("sampled_tiny", ("method",), "evil", "method"),
    ("sampled_tiny", ("model",), "m" * 5000, "model"),
    ("sampled_tiny", ("draft",), 5, "draft"),
    ("sampled_tiny", ("prompt",), "p" * (limits.MAX_PROMPT_CHARS + 1), "prompt"),
    ("sampled_tiny", ("draft_about",), {}, "draft_about"),
    ("sampled_tiny", ("settings", "temperature"), NAN, "temperature"),
    ("sampled_tiny", ("settings", "top_k"), 1.5, "top_k"),
    ("sampled_tiny", ("settings", "gamma"), 10**6, "gamma"),
    ("sampled_tiny", ("settings", "controller"), "c" * 5000, "controller"),
    ("sampled_tiny", ("settings", "seed"), -1, "seed"),
    ("bild", ("settings", "fallback_threshold"), "a", "fallback_threshold"),
    ("bild", ("settings", "rollback_threshold"), -1.0, "rollback_threshold"),
    ("sampled_tiny", ("summary", "wall_s"), NAN, "wall_s"),
    ("sampled_tiny", ("summary", "tokens_per_s"), "fast", "tokens_per_s"),
    ("sampled_tiny", ("summary", "mean_gamma"), 1e12, "mean_gamma"),  # the theory plot's γ axis would reach it
    ("sampled_tiny", ("summary", "alpha_hat"), 2.0, "alpha_hat"),
    ("sampled_tiny", ("summary", "stop_reason"), "<img src=x>", "stop_reason"),
    ("sampled_tiny", ("summary", "c_measured"), INF, "c_measured"),
    # the controllers' records the views read
    ("heuristic", ("rounds", 1, "controller", "gamma_before"), "x", "gamma_before"),
    ("heuristic", ("rounds", 1, "controller", "evidence"), {"a": 1}, "evidence"),
    ("beta-ts", ("rounds", 1, "controller", "alpha_before"), "x", "alpha_before"),
    ("beta-ts", ("rounds", 1, "controller", "theta"), [NAN], "theta"),
    ("beta-ts", ("rounds", 1, "controller", "continue"), "yes", "continue"),
    ("cali-ts", ("rounds", 1, "controller", "mu"), ["a"], "mu"),
    ("cali-ts", ("rounds", 1, "controller", "sigma"), [1e-300], "sigma"),
    ("cali-ts", ("rounds", 1, "controller", "theta_hat"), 7, "theta_hat"),
    ("cali-ts", ("rounds", 1, "controller", "verify_ratio"), {}, "verify_ratio"),
    ("cali-ts", ("rounds", 1, "controller", "other"), [INF], "controller"),
    ("cali-ts", ("rounds", 1, "controller", "other"), list(range(limits.MAX_FREE_VALUES)), "controller"),
    ("cali-ts", ("rounds", 1, "controller", "bad\nkey"), 1, "controller"),
    ("sampled_tiny", ("rounds", 1, "controller"), [1], "controller"),
    # BiLD's hand-over records
    ("bild", ("rounds", 1, "detail", "rollback", "position"), "x", "position"),
    ("bild", ("rounds", 1, "detail", "rollback", "distance"), DELETE, "distance"),
    ("bild", ("rounds", 1, "detail", "rollback_threshold"), DELETE, "rollback_threshold"),
    ("bild", ("rounds", 0, "detail", "small_max_prob"), 2.0, "small_max_prob"),
    ("bild", ("rounds", 0, "detail", "small_max_prob"), None, "small_max_prob"),
    ("bild", ("rounds", 0, "detail", "reason"), "evil", "reason"),
    ("bild", ("rounds", 0, "detail", "fallback_threshold"), DELETE, "fallback_threshold"),
    # BiTA's tree
    ("bita", ("rounds", 2, "tree", "next_group"), 99, "next_group"),
    ("bita", ("rounds", 2, "tree", "next_group"), "a", "next_group"),
    ("bita", ("rounds", 2, "tree", "nodes", 0, "token"), -1, "token"),
    ("bita", ("rounds", 2, "tree", "nodes", 0, "q"), NAN, "q"),
    ("bita", ("rounds", 2, "tree", "prompt_tokens"), 10**6, "prompt_tokens"),
    ("bita", ("rounds", 2, "tree", "attention", 0), "2" * 40, "attention"),
    ("bita", ("rounds", 2, "tree", "surprise"), 1, "unknown field"),
    ("bita", ("rounds", 2, "detail", "input_positions"), "many", "input_positions"),
    # the feature head's per-draft cosines
    ("bild", ("rounds", 1, "detail", "feature_cos"), [1.5], "feature_cos"),
    ("bild", ("rounds", 1, "detail", "feature_cos"), [NAN], "feature_cos"),
    ("bild", ("rounds", 1, "detail", "feature_cos"), [0.5] * 100, "feature_cos"),
    ("bild", ("rounds", 1, "detail", "feature_cos"), "<b>", "feature_cos"),
]


@pytest.mark.parametrize("name,path,value,named", FORGERIES,
                         ids=[f"{'.'.join(map(str, p))}={str(v)[:12]}" for _, p, v, _ in FORGERIES])
def test_a_forged_field_is_refused_in_one_line(traces, name, path, value, named):
    text = forge(traces[name], path, value)
    with pytest.raises(explorer.TraceFormatError) as err:
        explorer.load_trace(text)
    assert named in one_line(str(err.value))


def test_the_real_traces_still_load(traces):
    for data in traces.values():
        trace = explorer.load_trace(json.dumps(data))
        assert explorer.load_trace(trace.to_json()) == trace


@pytest.mark.parametrize("text", [
    "[" * 10_000 + "]" * 10_000,
    '{"a": ' * 10_000 + "1" + "}" * 10_000,
])
def test_a_depth_bomb_is_refused_in_one_line(text):
    with pytest.raises(explorer.TraceFormatError, match=f"deeper than {limits.MAX_JSON_DEPTH}") as err:
        explorer.load_trace(text)
    one_line(str(err.value))


def test_deep_nesting_inside_a_free_form_record_is_refused(traces):
    nested = 1
    for _ in range(40):  # parses fine, but deeper than a trace may nest
        nested = [nested]
    with pytest.raises(explorer.TraceFormatError, match="deeper") as err:
        explorer.load_trace(forge(traces["sampled_tiny"], ("rounds", 1, "detail"), {"x": nested}))
    one_line(str(err.value))


@pytest.mark.parametrize("text", ["1" * 5000, b"\xff\xfe\x00garbage", "{\"schema\": NaN", None])
def test_unreadable_files_are_refused_in_one_line(text):
    with pytest.raises(explorer.TraceFormatError, match="not a trace file") as err:
        explorer.load_trace(text)
    one_line(str(err.value))


@pytest.mark.parametrize("limit,value,named", [
    ("MAX_TRACE_BYTES", 1000, "MB"),
    ("MAX_TRACE_ROUNDS", 3, "rounds"),
    ("MAX_TRACE_TOKENS", 10, "tokens"),
])
def test_the_size_caps_hold(traces, monkeypatch, limit, value, named):
    text = json.dumps(traces["sampled_tiny"])
    explorer.load_trace(text)
    monkeypatch.setattr(limits, limit, value)
    with pytest.raises(explorer.TraceFormatError, match=named) as err:
        explorer.load_trace(text)
    one_line(str(err.value))


def test_a_forged_next_group_is_refused_and_a_real_one_draws(traces):
    with pytest.raises(explorer.TraceFormatError, match="next_group"):
        explorer.load_trace(forge(traces["bita"], ("rounds", 1, "tree", "next_group"), 9))
    trace = explorer.load_trace(forge(traces["bita"], ("rounds", 1, "tree", "next_group"), 8))
    tree_view = next(v for v in viz.views_for(trace) if v.name == "bita-tree")
    assert "next drafts from the mask group of node" in tree_view.render(trace, 1)


def test_the_engines_bounds_fit_the_trace_limits():
    from explorer.methods.bita.tokens import MAX_MASKS
    from explorer.methods.bita.tree import MAX_TOP_K, MAX_TREE_INPUT
    from explorer.engine.rounds import TOP_ALTERNATIVES

    assert MAX_TREE_INPUT <= limits.MAX_TREE_POSITIONS and MAX_MASKS <= limits.MAX_GAMMA
    assert max(MAX_TOP_K, TOP_ALTERNATIVES) <= limits.MAX_TRACE_TOP


# -- values at the edge of what is allowed still draw -------------------------------------------------


def every_round(key: str, update: dict):
    def edit(data):
        for r in data["rounds"]:
            if r.get(key) is not None:
                r[key].update(update)
    return edit


EDGES = {
    "beta-ts huge counts": ("beta-ts", every_round("controller", {"alpha_before": 1e12, "beta_before": 1e12,
                                                                  "beta_after": 1e-300})),
    "beta-ts zero counts": ("beta-ts", every_round("controller", {"alpha_before": 0, "beta_before": 0})),
    "cali-ts without its lists": ("cali-ts", lambda d: [r.update(controller={"kind": "cali-ts"}) for r in d["rounds"]]),
    "cali-ts zero sigma": ("cali-ts", lambda d: [r["controller"].update(sigma=[0.0] * len(r["controller"]["sigma"]))
                                                 for r in d["rounds"]]),
    "heuristic at γ 64": ("heuristic", every_round("controller", {"gamma_before": 64, "gamma_after": 0,
                                                                  "evidence": "<b>|\n" * 100})),
    "bild without detail": ("bild", lambda d: [r.update(detail={}) for r in d["rounds"]]),
    "bild far rollback": ("bild", lambda d: [r["detail"]["rollback"].update(position=64, distance=1e12, flushed=64)
                                             for r in d["rounds"] if r["detail"]["rollback"]]),
    "bita largest prompt": ("bita", every_round("tree", {"prompt_tokens": limits.MAX_TREE_PROMPT, "masks": 1024})),
    "bita bare tree": ("bita", lambda d: [r["tree"].pop(k, None) for r in d["rounds"] for k in
                                          ("kind", "masks", "top_k", "prompt_tokens", "context_inputs", "next_group")]),
    "summary extremes": ("sampled_tiny", lambda d: d["summary"].update(  # the rate its own tokens over its own clock
        wall_s=1e-9, tokens_per_s=d["summary"]["new_tokens"] / 1e-9, c_measured=1e12, predicted_speedup=0,
        mean_gamma=limits.MAX_GAMMA, alpha_hat=1.0)),
    "slowest rounds": ("ar", lambda d: [r.update(timing=dict.fromkeys(("draft_s", "verify_s", "other_s"),
                                                                      limits.MAX_TRACE_SECONDS)) for r in d["rounds"]]),
    "longest token texts": ("sampled_tiny", lambda d: d.update(
        token_text={k: "\n<&>'\"|" * (limits.MAX_PIECE_CHARS // 7) for k in d["token_text"]})),
}


def draw_everything(trace, last_only: bool = False) -> dict:
    """Every view of the trace at its first, middle and last round (or its last alone): {"figures": {title: [the
    figure's JSON as data, …]}, "html": all the HTML drawn, "summary": the run's summary}."""
    n = len(trace.rounds)
    figures: dict[str, list[dict]] = {}
    html = []

    def keep(title: str, figure) -> None:
        text = figure.to_json()
        assert not re.search(r"\bNaN\b|Infinity", text), f"{title} draws a number that is not finite"
        figures.setdefault(title, []).append(json.loads(text))

    for i in [n - 1] if last_only else sorted({0, n // 2, n - 1}):
        html.append(viz.token_html(trace, i))
        keep("round detail", viz.round_detail_figure(trace, i))
        for view in viz.views_for(trace):
            drawn = view.render(trace, i)
            if view.kind == "plot":
                keep(view.title, drawn)
            else:
                html.append(drawn)
    keep("latency", viz.latency_figure(trace, trace))
    keep("theory", viz.theory_figure(0.5, 0.2, 0.3, trace))
    return {"figures": figures, "html": "\n".join(html), "summary": viz.run_summary(trace)}


def series(drawn: dict, title: str, name: str) -> list:
    """The y values of the series ``name`` in the first figure titled ``title``."""
    return next(trace["y"] for trace in drawn["figures"][title][0]["data"] if trace.get("name") == name)


# what each forged trace's drawing must show, beyond that it draws (finite numbers, the run's summary)
SHOWS = {
    "beta-ts huge counts": lambda d: set(series(d, "TS posterior", "posterior mean α/(α + β)")) == {0.5},
    "heuristic at γ 64": lambda d: set(series(d, "Draft-length controller", "γ planned by the controller")) == {64}
    and "<b>|" not in json.dumps(d["figures"]) and "&lt;b&gt;" in json.dumps(d["figures"]),  # the evidence, escaped
    "slowest rounds": lambda d: all(set(series(d, "latency", f"{phase} (ms)")) == {limits.MAX_TRACE_SECONDS * 1000}
                                    for phase in ("draft", "verify", "other")),
    "longest token texts": lambda d: "&lt;&amp;&gt;" in d["html"] and "<&>" not in d["html"],
}


@pytest.mark.parametrize("edge", list(EDGES))
def test_values_at_the_edge_of_the_bounds_still_draw(traces, edge):
    name, edit = EDGES[edge]
    data = json.loads(json.dumps(traces[name]))
    edit(data)
    trace = explorer.load_trace(json.dumps(data))
    drawn = draw_everything(trace)
    assert f"**{trace.method}**" in drawn["summary"] and f"{len(trace.output_ids)} tokens" in drawn["summary"]
    assert len(drawn["figures"]["round detail"]) == len({0, len(trace.rounds) // 2, len(trace.rounds) - 1})
    assert edge not in SHOWS or SHOWS[edge](drawn), f"{edge}: the drawing does not show the forged values"


# -- the largest trace allowed --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def largest(traces):
    """Traces of MAX_TRACE_ROUNDS rounds for every method view: all drafts accepted at γ = 8 under
    calibrated TS (about 9 tokens a round, near the token cap), dynamic γ, lenience, the theory lab, a
    hierarchical draft, beam search at the widest k and γ, a feature head, SuffixDecoding, EAGLE-2's tree, a
    heuristic controller, BiLD, BiTA, the low-bit self-draft."""
    every_accepted = explorer.decode("tiny-random:1", "hello there", method="speculative", draft="model:tiny-random:1",
                                     gamma=8, controller="cali-ts", max_new_tokens=64, seed=1)
    dynamic = explorer.decode("tiny-random:1", "hello there", method="speculative", draft="model:tiny-random:2",
                              gamma=8, controller="dynamic-gamma-priced", max_new_tokens=64, seed=1)
    lenient = explorer.decode("tiny-random:1", "hello there", method="lenient", draft="model:tiny-random:2",
                              lenience=0.3, gamma=8, max_new_tokens=64, seed=1)
    synthetic = explorer.decode("tiny-random:1", "hello there", method="synthetic", synthetic_alpha=0.8, gamma=8,
                                max_new_tokens=64, seed=1)
    hierarchical = explorer.decode("tiny-random:1", "hello there", method="hierarchical",
                                   draft="model:tiny-random:2>model:tiny-random:3", gamma=8, max_new_tokens=64, seed=1)
    beam = explorer.decode("tiny-random:1", "hello there", method="beam", draft="model:tiny-random:2", beam_width=8,
                           gamma=16, max_new_tokens=64)
    feature_head = explorer.decode("tiny-random:1", "hello there", draft="feature-head:untrained", gamma=8,
                                   max_new_tokens=64, seed=1)
    suffix = explorer.decode("tiny-random:1", "hello there hello there hello", method="suffix", max_new_tokens=64,
                             session="largest")
    eagle_tree = explorer.decode("tiny-random:1", "hello there", method="eagle-tree", eagle_head="untrained",
                                 eagle_size="paper", eagle_tokens=8, eagle_top_k=3, eagle_depth=4, max_new_tokens=64)
    lookahead = explorer.decode("tiny-random:1", "hello there hello there hello", method="lookahead",
                                lookahead_window=16, lookahead_ngram=5, lookahead_guesses=8, max_new_tokens=64)
    quantized = explorer.decode("tiny-random:1", "hello there", method="quantized", gamma=8, max_new_tokens=64, seed=1)
    small = [every_accepted, dynamic, lenient, synthetic, hierarchical, beam, feature_head, suffix, eagle_tree,
             lookahead, quantized] + [
        explorer.load_trace(json.dumps(traces[name])) for name in ("heuristic", "bild", "bita")]
    return [repeated(t, limits.MAX_TRACE_ROUNDS) for t in small]


def test_the_largest_trace_loads_and_draws_every_view_quickly(largest):
    names = set()
    for big in largest:
        assert len(big.prompt_ids) + len(big.output_ids) <= limits.MAX_TRACE_TOKENS
        text = big.to_json()
        start = time.perf_counter()
        trace = explorer.load_trace(text)
        loaded = time.perf_counter() - start
        start = time.perf_counter()
        # at its last round: every view costs the same at any round of it (0.37, 0.34 and 0.37 s at the first, middle
        # and last round of a 4 096-round trace), so one round bounds the time; the forged traces above are drawn at three
        draw_everything(trace, last_only=True)
        drawn = time.perf_counter() - start
        names |= {v.name for v in viz.views_for(trace)}
        # measured on this project's 2-core machine: load ≤ 1.6 s, everything at three rounds ≤ 2.9 s (one: a third)
        assert loaded < 15 and drawn < 20, (trace.method, loaded, drawn)
    assert names == {v.name for v in viz.discover()}  # every registered view was drawn


# -- benchmark reports ----------------------------------------------------------------------------------

REPORT = json.loads((DATA / "bench_report.json").read_text())
REQUIRED = ("system", "tokens_per_s", "speedup_vs_ar")


def draw_report(report: dict) -> str:
    for against in ("ar", "hf"):
        compare_figure(report, against).to_json()
    return bench.markdown(report)


def test_a_report_without_its_optional_keys_loads_and_draws():
    bare = {"rows": [{k: row[k] for k in REQUIRED} for row in REPORT["rows"]]}
    table = draw_report(load_bench_report(json.dumps(bare)))
    assert table.count("\n| ") == len(REPORT["rows"]) and "–" in table


@pytest.mark.parametrize("key", sorted({k for row in REPORT["rows"] for k in row} - set(REQUIRED)) + ["meta"])
def test_each_optional_key_may_be_absent_or_null(key):
    for value in (DELETE, None):
        report = json.loads(json.dumps(REPORT))
        for holder in ([report] if key == "meta" else report["rows"]):
            if value is DELETE:
                holder.pop(key, None)
            else:
                holder[key] = value
        table = draw_report(load_bench_report(json.dumps(report)))
        rows = [cells(line) for line in table.split("\n") if line.startswith("| ")][1:]
        assert [row[0] for row in rows] == [row["system"] for row in REPORT["rows"]]  # every system, in order
        assert {len(row) for row in rows} == {14}  # every column, a missing value a dash
        assert sum(row.count("–") for row in rows) >= FULL_DASHES  # what is gone is shown as gone, not invented


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


FULL_DASHES = sum(cells(line).count("–") for line in draw_report(REPORT).split("\n")[2:] if line.startswith("| "))


def test_odd_strings_in_a_report_stay_in_their_cells():
    report = json.loads(json.dumps(REPORT))
    odd = "a|b\n<img src=x onerror=alert(1)>\r\n| --- |"
    for row in report["rows"]:
        row["system"] = odd + row["system"]
        row["speedup_vs_ar_by_category"] = {" ".join(odd.split()): 0.5}  # keys must be printable
    report["meta"]["model"] = odd
    table = draw_report(load_bench_report(json.dumps(report)))
    rows = [line for line in table.split("\n") if line.startswith("| ")]
    assert len(rows) == len(REPORT["rows"]) + 1  # the header and one line per system
    assert all(len(re.findall(r"(?<!\\)\|", line)) == 15 for line in rows)  # 14 cells each


def row_edit(key, value):
    return lambda r: r["rows"][0].__setitem__(key, value)


@pytest.mark.parametrize("edit,named", [
    (row_edit("tokens_per_s", NAN), "tokens_per_s"),
    (row_edit("tokens_per_s", "fast"), "tokens_per_s"),
    (row_edit("speedup_vs_ar", 0), "speedup_vs_ar"),
    (row_edit("speedup_vs_hf", -1.0), "speedup_vs_hf"),
    (row_edit("system", "s" * 5000), "system"),
    (row_edit("acceptance_rate", 7), "acceptance_rate"),
    (row_edit("identical_to_ar", "yes"), "identical_to_ar"),
    (row_edit("speedup_vs_ar_by_category", {"qa": "x"}), "speedup_vs_ar_by_category"),
    (row_edit("extra", [INF]), "extra"),
    (row_edit("ms_per_token", {"draft": -1.0, "verify": 30.0, "other": 1.0}), "ms_per_token"),
    (row_edit("ms_per_token", {"draft": 1.0, "verify": 30.0, "other": 1.0, "<b>": 2}), "ms_per_token"),
    (lambda r: r.update(rows={}), "rows"),
    (lambda r: r.update(rows=r["rows"] * 100), "rows"),
    (lambda r: r["meta"].update(verify_cost_ratio="x"), "verify_cost_ratio"),
    (lambda r: r.update(meta=[1]), "meta"),
    (lambda r: r.update(pad="x" * limits.MAX_REPORT_BYTES), "MB"),
])
def test_a_bad_report_is_refused_in_one_line(edit, named):
    report = json.loads(json.dumps(REPORT))
    edit(report)
    with pytest.raises(ExplorerError, match="not a benchmark report") as err:
        load_bench_report(json.dumps(report))
    assert named in one_line(str(err.value))


def test_a_report_depth_bomb_is_refused_in_one_line():
    with pytest.raises(ExplorerError, match=f"deeper than {limits.MAX_JSON_DEPTH}") as err:
        load_bench_report('{"rows": ' + "[" * 10_000 + "]" * 10_000 + "}")
    one_line(str(err.value))


# -- the widest tree a round may hold, for every method that draws trees (issue 40, item 3) ------------------


def widest(trace, nodes: int) -> tuple[str, int]:
    """``trace`` with its first tree round grown to ``nodes`` inputs (its own, then leaves beside them under the
    context, each seeing itself): the most the common tree checks allow is ``MAX_TREE_POSITIONS``."""
    data = json.loads(trace.to_json())
    r = next(r for r in data["rounds"] if r.get("tree") and r["tree"]["nodes"])
    add_leaves(r["tree"], nodes - len(r["tree"]["positions"]))
    return json.dumps(data), r["index"]


TREE_RUNS = {
    "bita": lambda: explorer.load_trace(json.dumps(saved("bita"))),
    "suffix": lambda: explorer.decode("tiny-random:1", "hello there hello there hello", method="suffix",
                                      suffix_size="paper", max_new_tokens=16, session=None),  # a tree whatever T(n)
    "eagle-tree": lambda: explorer.decode("tiny-random:1", "hello there", method="eagle-tree", eagle_head="untrained",
                                          eagle_size="paper", eagle_tokens=8, max_new_tokens=16),
    "lookahead": lambda: explorer.decode("tiny-random:1", "hello there hello there hello", method="lookahead",
                                         lookahead_window=16, lookahead_ngram=5, lookahead_guesses=8, max_new_tokens=16),
}
VIEW_BYTES = 2 * 2**20  # what one view of one round may send the page (BiTA's capped mask: 0.9 MB)


@pytest.mark.parametrize("method", list(TREE_RUNS))
def test_the_widest_tree_a_round_may_hold_is_refused_or_draws_small(method):
    text, index = widest(TREE_RUNS[method](), limits.MAX_TREE_POSITIONS)
    try:
        trace = explorer.load_trace(text)
    except ExplorerError as err:  # a method whose options cannot produce such a tree refuses it on load
        assert method == "lookahead", one_line(str(err))
        return
    assert method != "lookahead"
    for view in viz.views_for(trace):
        start = time.perf_counter()
        drawn = view.render(trace, index)
        sent = drawn.to_json() if view.kind == "plot" else drawn
        seconds = time.perf_counter() - start
        assert len(sent) < VIEW_BYTES and seconds < 5, (view.name, len(sent), seconds)
