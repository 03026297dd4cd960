"""``beam``: beam search on the target, sped up by a draft (the reproduction report's Algorithm 2; Leviathan
et al., Appendix A.4). Greedy (a search, like ``generate(num_beams=k, do_sample=False)``). Two rules:

``exact`` (Leviathan et al. A.4): the draft runs its own beam search at width k for γ steps from the
    target's beams; the target scores every draft beam (one forward for all of them); step j is accepted while
    the target's own beam step from its beams gives the same k beams as the draft's step j. The first step
    where they differ is the target's own (the correction), and after γ accepted steps the target adds one
    more (the bonus). Every step taken is the target's own beam step, so the output is identical to beam
    search on the target alone, which follows Hugging Face's rules (``TargetBeams``): 2k candidates per
    step, an end-of-sequence candidate among the top k finishes with its log-probability / its length
    (length penalty 1), the rest of the top k run on, the search stops when no running beam can beat the
    worst of k finished ones (``early_stopping=False``) or at ``max_new_tokens``.
``004`` (the reproduction report's Algorithm 2): each beam drafts γ tokens, the target verifies them with
    speculative sampling (greedy: accept while the draft is the target's argmax), and the beam branches after
    its accepted prefix into the k most likely tokens of p' = norm(max(0, p − q)) (greedy: p without the
    refused token; p_{γ+1} after a full accept); of all candidates the k best by running log-probability
    run on. Not beam search on the target: every beam takes the target's greedy path for its accepted
    prefix and candidates of different lengths compete on raw log-probability. As printed, the algorithm
    keeps one candidate per beam (k beams never form from one prompt) and adds only log p'(t) to a score;
    here a beam branches into k candidates and a score is the target's log-probability of every token a
    candidate gains, the running log-probability the report's text describes.

Beams are scored with the target's log-softmax at temperature 1. A round's beam rows run in one target
forward through a KV cache that holds the trie of every beam's tokens (``engine.trie_cache.TrieCache``):
only the nodes no earlier round ran are computed, each under tree attention (Hugging Face batches the k
rows in one forward). A draft with a forward of its own scores its k beams a step the same way
(``Drafter.row_scorer``). At k = 3 this made the search 3.6× faster than a forward per beam row.

The trace: ``output_ids`` is the best finished beam, and its rounds are that beam's history, so every
single-sequence invariant of a trace holds for it: round r emits the tokens the best beam's ancestor gained
in round r (accepted draft steps, then the target's correction or bonus step); ``drafted`` is the draft's
beam along that ancestor. ``detail.beam`` keeps every beam of every step (``layers``, see ``DETAIL``),
which the beam-tree view draws.

Here: the record (options, detail schema, bench syntax); ``search.py`` beam search on the target by Hugging
Face's rules; ``rules.py`` the two rules, one round each; ``step.py`` the search as the round driver's step.
"""

from __future__ import annotations

import dataclasses

from .rules import MAX_BEAM_GAMMA, MAX_WIDTH, RULES, SpeculativeBeams
from .search import TargetBeams  # noqa: F401  (Hugging Face's rules, stepped by the tests on their own)
from .step import BeamStep
from .sweep import SWEEP
from ...drafts import distribution_kinds, make_drafter
from ...engine.rounds import clock_for, run_rounds
from ...errors import ExplorerError
from ...limits import clip
from ...run import Decoding
from ...trace.schema import COUNT
from ...untrusted import BOOL, FINITE, LIST, Kind, ListOf, Maybe, Record, Refused, one_of, whole
from .. import Method, Options, Request, option, register

MAX_BEAM_WORK = 2048  # width × max_new_tokens: one request's beam rows (width 8: 256 tokens, ≈ minutes on 2 cores)


@dataclasses.dataclass(frozen=True)
class BeamOptions(Options):
    prefix = "beam_"
    title = "Speculative beam search"

    width: int = option(3, "beams kept per step", paper="004 Algorithm 2, k; Leviathan et al. A.4", symbol="k",
                        low=1, high=MAX_WIDTH, label="beam width k", slider=(1, MAX_WIDTH, 1))
    rule: str = option("exact", "exact: Leviathan et al. A.4, the draft's beam search checked step by step, output "
                       "identical to beam search on the target; 004: the reproduction report's Algorithm 2, each beam "
                       "verified by speculative sampling then branched (approximate)", choices=RULES,
                       label="rule: exact (A.4) or 004 (approximate)")


# -- the method ----------------------------------------------------------------------------------------


def start(request: Request, options: BeamOptions) -> Decoding:
    if not request.sampling.greedy:
        raise ExplorerError("beam search here is a search, like generate(num_beams=k, do_sample=False): set temperature 0")
    work = options.width * request.settings.max_new_tokens
    if work > MAX_BEAM_WORK:
        raise ExplorerError(f"beam search of width {options.width} costs about {options.width} target forwards a token: "
                            f"width × max_new_tokens may be at most {MAX_BEAM_WORK} (here {work}); ask for fewer "
                            "tokens or a narrower beam")
    drafter = make_drafter(request.draft, request.target, request.load, "beam")
    if options.rule == "exact" and not drafter.gives_distributions:
        raise ExplorerError(f"the exact rule runs the draft's own beam search, so it needs a draft with "
                            f"distributions (model:<name>, early-exit:N, int4 or int8), not {drafter.spec}")
    settings = dataclasses.replace(request.settings, controller="fixed", gamma=min(request.settings.gamma, MAX_BEAM_GAMMA))

    target = request.target
    beams = SpeculativeBeams(request, options, drafter, clock_for(target.device))
    rounds = run_rounds(target.device, target.eos_token_ids, BeamStep(beams, options.rule, options.width),
                        request.prompt_ids, settings.max_new_tokens)
    return Decoding(request, "beam", drafter.spec, settings, rounds, drafter.about)


LAYER_KINDS = ("accepted", "corrected", "bonus", "target", "branch")
MAX_CANDIDATES = MAX_WIDTH * MAX_WIDTH  # a step's candidates: k beams, k each (004)
CANDIDATE = Record({
    "parent": whole(0, MAX_CANDIDATES),
    "tokens": ListOf(COUNT, MAX_BEAM_GAMMA + 1, f"a list of 1 to {MAX_BEAM_GAMMA + 1} token ids", least=1),
    "score": Kind("a finite score (a number of magnitude below 1e9)", lambda v: FINITE.ok(v) and abs(v) < 1e9),
    "kept": BOOL, "finished": BOOL,
}, ("parent", "tokens", "score", "kept", "finished"), strict=False, words="a candidate (an object)")
BEAM = Record({
    "rule": one_of(RULES), "width": whole(1, MAX_WIDTH),
    "after": Maybe(Record({"rounds": whole(1, 2**31 - 1), "steps": whole(1, 2**31 - 1)}, ("rounds", "steps"),
                          strict=False, words="an object counting the search's rounds and steps after the winner's")),
    "layers": ListOf(ListOf(CANDIDATE, MAX_CANDIDATES, f"a list of 1 to {MAX_CANDIDATES} candidates", least=1),
                     MAX_BEAM_GAMMA + 1, f"a list of 1 to {MAX_BEAM_GAMMA + 1} steps", least=1),
    "kinds": ListOf(one_of(LAYER_KINDS), MAX_BEAM_GAMMA + 1, f"a list of step kinds ({', '.join(LAYER_KINDS)})"),
    "best": LIST,
}, ("rule", "width", "layers", "kinds", "best"), strict=False)
# what the beam-tree view reads of a round's ``detail.beam`` (written by ``step.BeamStep``), of its kinds and sizes
DETAIL = Record({"beam": Maybe(BEAM)}, strict=False)


def check_round(data: dict, path: str) -> None:
    """What ``DETAIL`` cannot say of a loaded round's ``detail.beam``, whose parts depend on each other:
    one kind and one best index per step, that index -1 or one of its step's candidates."""
    beam = data.get("detail", {}).get("beam")
    if beam is None:
        return
    where = f"{path}.detail.beam"
    layers, kinds, best = beam["layers"], beam["kinds"], beam["best"]
    if len(kinds) != len(layers):
        raise Refused(f"{where}.kinds must name one of {', '.join(LAYER_KINDS)} per step")
    if len(best) != len(layers):
        raise Refused(f"{where}.best must hold one index per step")
    for i, (layer, on_best) in enumerate(zip(layers, best)):
        if not whole(-1, len(layer) - 1).ok(on_best):
            raise Refused(f"{where}.best[{i}] must be -1 or a candidate's index")


def system(rest: str) -> dict:
    """``beam:<rule>:<k>:<draft>`` as decode keywords."""
    rule, _, after = rest.partition(":")
    width, _, draft = after.partition(":")
    if rule not in RULES or not width.isdigit() or not draft:
        raise ExplorerError(f"bad system {clip('beam:' + rest, 60)}: write beam:<{'|'.join(RULES)}>:<k>:<draft>[@γ]")
    return {"beam_rule": rule, "beam_width": int(width), "draft": draft}


def round_tokens(r) -> list[int]:
    """The ids of every candidate the beam search weighed in a round."""
    return [t for layer in (r.detail.get("beam") or {}).get("layers", ()) for node in layer for t in node["tokens"]]


register(Method(
    name="beam",
    paper="Leviathan et al. 2023, A.4; Tulsian et al. (004), Algorithm 2",
    summary="speculative beam search: exact (Leviathan et al. A.4: the draft's beam search checked step by step, "
            "identical to beam search on the target) or 004 (the reproduction's Algorithm 2, approximate); greedy",
    lossy=lambda options: options is not None and options.rule == "004",
    options=BeamOptions,
    start=start,
    controller=False,
    gamma=True,  # the draft's steps per round; no controller chooses them
    detail=DETAIL,
    check_round=check_round,
    round_tokens=round_tokens,
    system=system,
    glossary="speculative beam search: k candidate texts (beams) kept at once, each extended by the draft and "
             "checked by the target. Rule **exact** (Leviathan et al., Appendix A.4) keeps the draft's beam steps "
             "only where they equal the target's own, so the result is the target's beam search; rule **004** "
             "follows the reproduction report of speculative decoding (Tulsian, Goyal and Aggarwal), whose "
             "**Algorithm 2** branches after each verified draft: faster, approximate (lossy).",
    system_syntax=f"beam:<{'|'.join(RULES)}>:<k>:<draft>[@γ]",
    sweeps=(SWEEP,),
    drafts=lambda options: distribution_kinds() if options is None or options.rule == "exact"
    else distribution_kinds() + ("prompt-lookup",),
    # the target's own weights in 4 bits agree with it almost always, so the exact rule accepts 89 % of the draft's
    # beam steps: 43.9 tok/s at k = 3 against 17.1 with early-exit:4 and 25.4 for Hugging Face's beam search
    default_draft="int4",
    draft_words="Beam search's exact rule runs the draft's own beam search, so the draft must give distributions: "
                "model:<name>, early-exit:N, int4 or int8 (the 004 rule also takes prompt-lookup:n).",
))
