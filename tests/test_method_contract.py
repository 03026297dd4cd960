"""The method contract (issue 25): a method is its record. A throw-away method, written as a method module
would be — its options, its own draft kind, its trainer, its detail schema, its glossary words, its view —
registers through the registries alone and is then found by the API, the CLI (its flags and its trainer),
the benchmark's and the race's grammar, the page's defaults and glossary, the trace loader and the audit.
And every real method keeps the word its record gives, checked over the registry (no list of names)."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import gradio as gr
import pytest

import explorer
from explorer import bench, cli, drafts, methods, race
from explorer.audit import greedy_audit
from explorer.engine.drafters import PromptLookupDrafter, Proposal
from explorer.methods.speculative import run_speculative
from explorer.ui.glossary import glossary_markdown
from explorer.ui.handlers import Handlers
from explorer.ui.options import build_options_panel
from explorer.untrusted import Record, whole
from explorer.viz import views
from explorer.viz.audit import greedy_audit_text

PROMPT = "one two three one two three one two"


# -- the throw-away method: what its module, its view and its draft kind would hold -----------------------


class EchoDrafter(PromptLookupDrafter):
    """Prompt lookup under another name, recording what it echoed."""

    def __init__(self, n: int):
        super().__init__(n)
        self.spec = self.about = f"echo:{n}"

    def propose(self, context, k, cfg, rng, stop) -> Proposal:
        proposal = super().propose(context, k, cfg, rng, stop)
        return dataclasses.replace(proposal, detail={"echo_hits": len(proposal.tokens)})


def _echo(spec, argument, target, load_model):
    return EchoDrafter(drafts.positive_int(argument, spec, "echo:n"))


ECHO = drafts.DraftKind("echo", "echo:n", _echo, detail=Record({"echo_hits": whole(0, 64)}, strict=False),
                        glossary="the echo draft of the contract test", examples=("echo:2",))


@dataclasses.dataclass(frozen=True)
class EchoOptions(methods.Options):
    prefix = "echo_"
    title = "Echo: how lenient"
    lenience: float = methods.option(1.0, "accept drafts this lenient (1: exact)", low=0.01, high=1.0,
                                     slider=(0.05, 1, 0.05), label="lenience")


def _train_echo(args, argv) -> int:
    print(f"echo trained {args.rounds} rounds")
    return 0


ECHO_METHOD = methods.Method(
    name="echo", summary="speculative decoding with the echo draft", lossy=lambda o: o is not None and o.lenience < 1,
    options=EchoOptions, start=lambda request, options: run_speculative(
        request, drafts.make_drafter(request.draft, request.target, request.load), "echo", options.lenience),
    drafts=("echo",), default_draft="echo:2", draft_words="echo runs its own echo draft.",
    round_tokens=lambda r: [], glossary="the throw-away method of the contract test",
    trainers=(methods.Trainer("echo-draft", "train the echo draft", "Trains nothing, quickly.",
                              lambda parser: parser.add_argument("--rounds", type=int, default=1), _train_echo),),
)
ECHO_VIEW = views.MethodView("echo-hits", "Echo: hits per round", lambda t: t.method == "echo",
                             lambda t, i: f"<p>{t.rounds[i].detail.get('echo_hits', 0)} echoed</p>", kind="html")


@pytest.fixture
def echo():
    drafts.register_kind(ECHO)
    methods.register(ECHO_METHOD)
    views.register(ECHO_VIEW)
    yield ECHO_METHOD
    methods._REGISTRY.pop("echo")
    drafts.KINDS.pop("echo")
    views.VIEWS.pop("echo-hits")


def test_a_throw_away_method_is_found_everywhere_through_its_record(echo, tiny_target, capsys):
    # the API: its keyword, its draft kind, greedy output identical to ar, lossy by its options
    trace = explorer.decode(tiny_target, PROMPT, method="echo", draft="echo:3", max_new_tokens=12)
    ar = explorer.decode(tiny_target, PROMPT, max_new_tokens=12)
    assert trace.output_ids == ar.output_ids and any(r.drafted for r in trace.rounds) and not trace.settings.lossy
    assert any(r.detail.get("echo_hits") for r in trace.rounds)
    lossy = explorer.decode(tiny_target, PROMPT, method="echo", draft="echo:3", echo_lenience=0.2, max_new_tokens=12)
    assert lossy.settings.lossy
    with pytest.raises(explorer.ExplorerError, match="echo cannot run the draft 'prompt-lookup:3': echo runs its own"):
        explorer.decode(tiny_target, PROMPT, method="echo", draft="prompt-lookup:3")
    # the trace loader: its detail schema, and lossy from its record for a file that does not say
    assert explorer.load_trace(trace.to_json()) == trace
    data = json.loads(trace.to_json())
    forged = next(r for r in data["rounds"] if "echo_hits" in r["detail"])
    forged["detail"]["echo_hits"] = "many"
    with pytest.raises(explorer.TraceFormatError, match="echo_hits"):
        explorer.load_trace(json.dumps(data))
    older = json.loads(lossy.to_json())
    del older["settings"]["lossy"]
    assert explorer.load_trace(json.dumps(older)).settings.lossy
    # the audit reads the run's own word
    assert "identical" in greedy_audit_text(trace, ar, greedy_audit(trace, ar))
    words = greedy_audit_text(lossy, ar, greedy_audit(lossy, ar))
    assert "lossy" in words and "please report" not in words
    # its view
    assert ECHO_VIEW in views.views_for(trace)
    # the CLI: its flag and its trainer
    assert cli.main(["run", "--model", "tiny-random", "--prompt", PROMPT, "--method", "echo", "--draft", "echo:2",
                     "--echo-lenience", "1", "--max-new-tokens", "4", "--raw"]) == 0
    assert cli.main(["train", "echo-draft", "--rounds", "3"]) == 0
    assert "echo trained 3 rounds" in capsys.readouterr().out
    # the benchmark's and the race's grammar
    system = bench.parse_system("echo:echo:2/heuristic@3", 4, "fixed")
    assert (system.method, system.draft, system.controller, system.gamma) == ("echo", "echo:2", "heuristic", 3)
    assert race._race_system("echo:echo:2").method == "echo"
    assert "echo:<draft>[/controller][@γ]" in methods.system_syntax()
    # the glossary
    text = glossary_markdown()
    assert "the throw-away method of the contract test" in text and "the echo draft of the contract test" in text
    assert "echo:2" in drafts.draft_examples() and "echo:n" in drafts.draft_forms()
    # the page: the drafter menu and its help, its options panel, and its default draft when the box holds one it does not run
    with gr.Blocks():
        panel = build_options_panel("echo")
        page = SimpleNamespace(banner=gr.HTML(), draft=gr.Dropdown(allow_custom_value=True), gamma=gr.Number(),
                               controller=gr.Dropdown(allow_custom_value=True), status=gr.Markdown(), options=panel)
    assert "echo_lenience" in panel.controls
    handlers = Handlers(page)
    updates = handlers.method_changed("echo", "tiny-random", "prompt-lookup:3")
    assert updates[page.draft].value == "echo:2" and "echo runs its own echo draft" in updates[page.status]
    kept = handlers.method_changed("echo", "tiny-random", "echo:5")  # a draft it runs stays as typed
    assert kept[page.draft].value != "echo:2" and page.status not in kept
    # a preset's γ cap and controller do not carry over to a method without one: back to the defaults
    from explorer.engine.controllers import DEFAULT_CONTROLLER, DEFAULT_GAMMA
    carried = handlers.method_changed("echo", "tiny-random", "echo:5", 8, "cali-ts-priced")
    assert carried[page.gamma].value == DEFAULT_GAMMA and carried[page.controller].value == DEFAULT_CONTROLLER
    assert f"defaults for echo: γ {DEFAULT_GAMMA} and controller {DEFAULT_CONTROLLER}" in carried[page.status]
    unchanged = handlers.method_changed("echo", "tiny-random", "echo:5", DEFAULT_GAMMA, DEFAULT_CONTROLLER)
    assert unchanged[page.gamma].value is None and page.status not in unchanged  # only shown or hidden


# -- every real method keeps its record's word -------------------------------------------------------------


@pytest.mark.parametrize("method", list(methods.discover().values()), ids=lambda m: m.name)
def test_each_method_runs_its_default_draft_and_names_itself_in_the_grammar(method):
    defaults = method.make_options({})
    assert isinstance(method.is_lossy(defaults), bool) and method.summary
    if method.draft == "none":
        assert not method.accepts_draft("prompt-lookup:3") and method.draft_words
        name = method.name
    else:
        assert method.accepts_draft(method.default_draft, defaults), method.default_draft
        name = f"{method.name}:{method.default_draft}"
    if method.system is None:  # the default grammar reads its own name back
        keywords = methods.parse_system(name)
        assert keywords["method"] == method.name and keywords.get("draft") == (
            None if method.draft == "none" else method.default_draft)
    assert method.syntax().startswith(method.name)


@pytest.mark.parametrize("method", list(methods.discover().values()), ids=lambda m: m.name)
def test_each_methods_trainers_are_commands(method):
    commands = cli.build_parser()._subparsers._group_actions[0].choices["train"]._subparsers._group_actions[0].choices
    assert all(t.name in commands for t in method.trainers)


def test_a_chain_is_refused_by_name_of_the_methods_that_run_chains(tiny_target):
    with pytest.raises(explorer.ExplorerError, match="draft chain .*run it with method hierarchical"):
        explorer.decode(tiny_target, PROMPT, draft="prompt-lookup:2>prompt-lookup:3", max_new_tokens=2)
