"""Every sentence the page writes about a run reads right (#29 item 4): the summary, "why this speed"
and the audit, for a run of every registered method on the real model, carry no "?", "None", "nan",
"inf" or "T(1)/T(1)", every symbol they use is in the page's glossary, and a text that cites a theorem,
equation, algorithm or table names the paper it is from."""

from __future__ import annotations

import re

import pytest

import explorer
from explorer import methods, viz
from explorer.ui.glossary import glossary_markdown
from explorer.ui.showing import audit_words

PROMPT = "The cat sat on the mat. The cat sat on the"
TOKENS = 24
# a lone "?" (a missing value), Python's None, a float's nan / inf, a ratio of a thing to itself
BROKEN = re.compile(r"(?<![\w?])\?(?![\w?])|\bNone\b|\bnan\b|\binf\b|T\(1\)/T\(1\)")
# a citation of a paper's theorem, equation, algorithm, table or definition, and the names of the papers
CITED = re.compile(r"\b(?:Theorem|Thm|eq\.|Algorithm|Table|Definition)\s*\d")
PAPERS = re.compile(r"Leviathan|EESD|BiLD|BiTA|EAGLE|004|reproduction")
# Greek symbols (with a hat or a subscript), x_y subscripts, T(k)
SYMBOL = re.compile(r"[α-ωΑ-Ω]\u0302?(?:_[A-Za-z]+)?|\b[A-Za-z]_[a-zA-Z]\b|T\(\w+\)")


def _check(where: str, text: str, glossary: str) -> None:
    """No broken value, every symbol in the glossary, every citation with its paper (per paragraph)."""
    broken = [text[max(0, m.start() - 60):m.end() + 30] for m in BROKEN.finditer(text)]
    assert not broken, f"{where}: {broken}"
    symbols = {re.sub(r"T\(\w+\)", "T(n)", s) for s in SYMBOL.findall(text)}
    missing = sorted(s for s in symbols if s not in glossary)
    assert not missing, f"{where}: {missing} not in the glossary"
    for paragraph in text.split("\n\n"):
        if CITED.search(paragraph):
            assert PAPERS.search(paragraph), f"{where}: cites without the paper: {paragraph[:160]}"


def _run(model, method):
    options = {"method": method.name, "max_new_tokens": TOKENS}
    if method.draft != "none" and method.preset is None:
        options["draft"] = method.default_draft
    return explorer.decode(model, PROMPT, **options)


@pytest.fixture(scope="module")
def plain(default_model):
    """Plain decoding of the prompt, what every method's run is weighed against: decoded once for the file (greedy, so
    the same for each of them)."""
    return explorer.decode(default_model, PROMPT, max_new_tokens=TOKENS)


@pytest.mark.parametrize("method", list(methods.discover().values()), ids=lambda m: m.name)
def test_what_the_page_says_of_a_run_is_whole_and_its_symbols_are_explained(default_model, plain, method):
    trace = _run(default_model, method)
    glossary = glossary_markdown()
    for baseline in (plain, None):  # compared, and before plain decoding has run
        texts = {"summary": viz.run_summary(trace, baseline), "why this speed": viz.speed_explanation(trace, baseline),
                 "audit": audit_words(trace, baseline)}
        for where, text in texts.items():
            _check(f"{method.name}, {where}", text, glossary)


def test_the_race_says_whole_sentences_for_a_lane_of_every_method(default_model):
    """The race's lanes (every method with its defaults, as the page offers them) and its report's table
    and footnote (once "? threads … γ = ? (?)")."""
    import html as html_lib

    from explorer import bench, race
    from explorer.viz.race import race_html

    glossary = glossary_markdown()
    systems = race.race_systems()
    for k in range(0, len(systems), race.MAX_LANES):  # a race takes three lanes besides plain decoding
        lanes = race.run(race.start(default_model, PROMPT, systems[k:k + race.MAX_LANES], max_new_tokens=12))
        shown = html_lib.unescape(re.sub(r"<[^>]+>", " ", race_html(race.snapshot(lanes), 12)))
        _check(f"race lanes {systems[k:k + race.MAX_LANES]}", shown, glossary)
        _check(f"race report {systems[k:k + race.MAX_LANES]}", bench.markdown(race.race_report(lanes)), glossary)
