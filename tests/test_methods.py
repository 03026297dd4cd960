"""The method registry: options checked where they are defined, keywords routed to their method, and a
new method as one record that the API, the CLI, the page and the trace loader all pick up."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import gradio as gr
import pytest

import explorer
from explorer import cli, methods
from explorer.engine.drafters import PromptLookupDrafter
from explorer.trace import SCHEMA
from explorer.trace.migrate import SCHEMA_V1
from explorer.methods.bild import BildOptions
from explorer.methods.bita import BitaOptions
from explorer.methods.speculative import run_speculative
from explorer.ui.options import build_options_panel

PROMPT = "one two three one two three one two"


def test_every_method_is_registered_once_in_order():
    assert list(explorer.METHODS) == ["ar", "speculative", "quantized", "eesd", "eagle", "eagle-tree", "bild", "bita",
                                     "suffix", "lookahead", "lenient", "hierarchical", "beam", "synthetic"]
    defaults = {name: m.make_options({}) for name, m in methods.discover().items()}
    assert {name for name, m in methods.discover().items() if m.is_lossy(defaults[name])} == {"bild", "lenient"}
    beam = methods.get("beam")  # lossy by its options: the 004 rule is approximate, lenience 1 is exact
    assert beam.is_lossy(beam.make_options({"beam_rule": "004"})) and not beam.is_lossy(beam.make_options({}))
    lenient = methods.get("lenient")
    assert not lenient.is_lossy(lenient.make_options({"lenience": 1.0}))
    quantized = methods.get("quantized")  # the low-bit copy decoding alone is lossy; drafting, exact
    assert quantized.is_lossy(quantized.make_options({"quantized_role": "alone"}))


@pytest.mark.parametrize("make,words", [
    (lambda: BildOptions(fallback_threshold=1.5), "fallback_threshold (α_FB) must be from 0 to 1, got 1.5"),
    (lambda: BildOptions(rollback_threshold=-1.0), "rollback_threshold (α_RB) must be ≥ 0, or inf"),
    (lambda: BildOptions(max_small_steps=2.5), "max_small_steps must be a whole number"),
    (lambda: BildOptions(max_small_steps=True), "max_small_steps must be a whole number"),
    (lambda: BildOptions(fallback_threshold="0.5"), "must be a number"),
    (lambda: BildOptions(fallback_threshold=math.nan), "must be a number"),
    (lambda: BitaOptions(tree="bushy"), "bita_tree must be one of efficient, full, straightforward"),
    (lambda: BitaOptions(masks=9), "bita_masks (M) must be from 1 to 8"),
    (lambda: BildOptions(fallback_threshold=None), "needs a value"),
])
def test_options_refuse_bad_values_in_one_line(make, words):
    with pytest.raises(explorer.ExplorerError, match=None) as err:
        make()
    assert words in str(err.value) and "\n" not in str(err.value)


def test_options_keep_their_defaults_and_normalise():
    assert BildOptions() == BildOptions(0.6, 5.0, 10)
    assert BildOptions(rollback_threshold=math.inf).rollback_threshold is None  # ∞ and None: never roll back
    assert BitaOptions().as_dict() == {"tree": "efficient", "masks": None, "top_k": 3, "tokens": None}


def test_each_option_has_its_help_and_range():
    for method in methods.discover().values():
        for keyword, f in method.keywords().items():
            assert f.metadata["help"], keyword
            assert methods.describe(f), keyword


def test_keywords_go_to_their_method(tiny_target):
    with pytest.raises(explorer.ExplorerError, match="bita_tree is an option of bita, not of speculative"):
        explorer.decode(tiny_target, "ab", draft="prompt-lookup:2", bita_tree="full")
    with pytest.raises(explorer.ExplorerError, match="unknown keyword 'colour'"):
        explorer.decode(tiny_target, "ab", colour="red")


# -- a new method is one record ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LookupOptions(methods.Options):
    prefix = "lookup_"
    title = "Lookup: the n-gram size"
    n: int = methods.option(2, "the longest n-gram to look up", low=1, high=8, slider=(1, 8, 1), label="n-gram")


LOOKUP = methods.Method(
    name="lookup", summary="speculative decoding with prompt lookup of its own n-gram size", lossy=False,
    options=LookupOptions, draft="none",
    start=lambda request, options: run_speculative(request, PromptLookupDrafter(options.n), "lookup"),
)


@pytest.fixture
def lookup_registered():
    methods.register(LOOKUP)
    yield LOOKUP
    methods._REGISTRY.pop("lookup")


def test_a_new_method_reaches_the_api_the_cli_the_page_and_the_trace_loader(lookup_registered, tiny_target, capsys):
    assert explorer.METHODS["lookup"] == LOOKUP.summary
    # the API: its keyword, checked by its options; greedy output identical to ar (lossless)
    trace = explorer.decode(tiny_target, PROMPT, method="lookup", lookup_n=3, max_new_tokens=12)
    ar = explorer.decode(tiny_target, PROMPT, max_new_tokens=12)
    assert trace.method == "lookup" and trace.draft == "prompt-lookup:3" and trace.output_ids == ar.output_ids
    assert any(r.drafted for r in trace.rounds)
    with pytest.raises(explorer.ExplorerError, match="lookup_n must be from 1 to 8"):
        explorer.decode(tiny_target, PROMPT, method="lookup", lookup_n=0)
    # the trace loader knows it
    assert explorer.load_trace(trace.to_json()) == trace
    # the CLI: a flag with its help, passed through to decode
    help_text = cli.build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    assert "--lookup-n" in help_text and "the longest n-gram to look up" in help_text
    assert cli.main(["run", "--model", "tiny-random", "--prompt", PROMPT, "--method", "lookup", "--lookup-n", "2",
                     "--max-new-tokens", "4", "--raw"]) == 0
    assert cli.main(["run", "--model", "tiny-random", "--prompt", PROMPT, "--method", "ar", "--lookup-n", "2"]) == 2
    assert "lookup_n is an option of lookup, not of ar" in capsys.readouterr().err
    # the page: its options panel, hidden until it is chosen; the values come back as keywords
    with gr.Blocks():
        panel = build_options_panel("lookup")
    assert set(panel.boxes) == {"eagle-tree", "bild", "bita", "suffix", "lookahead", "lenient", "synthetic",
                                 "hierarchical", "beam", "quantized", "lookup"} and "lookup_n" in panel.controls
    assert panel.keywords("lookup", {panel.controls["lookup_n"]: 4.0}) == {"lookup_n": 4}


# -- traces: settings.options, @1 files ---------------------------------------------------------------------

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("name", ["ar", "bild", "bita", "prompt_lookup", "sampled_tiny"])
def test_saved_v1_traces_load_as_v2(name):
    text = (DATA / f"trace_{name}.json").read_text()
    assert json.loads(text)["schema"] == SCHEMA_V1
    trace = explorer.load_trace(text)
    assert trace.schema == SCHEMA and explorer.load_trace(trace.to_json()) == trace
    if name == "bild":  # its thresholds moved from the settings into the options
        assert trace.settings.options == {"fallback_threshold": 0.5, "rollback_threshold": 3.0, "max_small_steps": 10}
    else:
        assert trace.settings.options == {}


def test_a_new_trace_records_its_options_and_they_are_checked_on_load(tiny_target, tiny_draft):
    trace = explorer.decode(tiny_target, "ab", method="bild", draft=tiny_draft, rollback_threshold=math.inf,
                            max_new_tokens=6)
    assert trace.settings.options == {"fallback_threshold": 0.6, "rollback_threshold": None, "max_small_steps": 10}
    data = json.loads(trace.to_json())
    data["settings"]["options"]["fallback_threshold"] = 2.0
    with pytest.raises(explorer.TraceFormatError, match=r"settings.options: fallback_threshold \(α_FB\) must be"):
        explorer.load_trace(json.dumps(data))
    data["settings"]["options"] = {"colour": "red"}
    with pytest.raises(explorer.TraceFormatError, match="bild has no option 'colour'"):
        explorer.load_trace(json.dumps(data))
    data["settings"]["options"] = {"n": 2}  # ar has no options at all
    data["method"] = "ar"
    with pytest.raises(explorer.TraceFormatError, match="ar has no option 'n'"):
        explorer.load_trace(json.dumps(data))
