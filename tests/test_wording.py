"""What a new user reads (#42 items 7, 9 and 10): ordinals and plurals written once, the audit's words when its
test cannot fail, beam's 004 rule named, the CLI's acceptance against α̂, r_d and HM in words, and ``bench --help``
printing every system the registry knows."""

from __future__ import annotations

import dataclasses
import re

import pytest
from helpers import make_trace

import explorer
from explorer import methods, viz
from explorer.words import ordinal, plural, times


def wrong_ordinals(text: str) -> list[str]:
    """Every "2th", "72th", "11st" … in ``text``: a number whose suffix is not its own."""
    return [m.group(0) for m in re.finditer(r"\b(\d+)(st|nd|rd|th)\b", text) if ordinal(int(m.group(1))) != m.group(0)]


def test_ordinals_and_plurals():
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 72, 101, 111, 112)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "72nd", "101st", "111th", "112th"]
    assert plural(1, "prompt") == "1 prompt" and plural(3, "repeat") == "3 repeats"
    assert plural(1, "degree of freedom", "degrees of freedom") == "1 degree of freedom"
    assert wrong_ordinals("every 2th and 72th; 11th, 3rd") == ["2th", "72th"]
    assert [times(n) for n in (1, 2, 1024)] == ["once", "2 times", "1,024 times"]


def test_thinned_views_say_every_2nd_not_every_2th():
    trace = make_trace("beta-ts", [(4, 2)] * 300)  # 300 rounds: a view draws every 2nd
    seen = []
    for view in viz.views.views_for(trace):
        fig = view.render(trace, 5)
        if view.kind == "plot":
            seen.append(fig.to_json())
    text = " ".join(seen)
    assert "every 2nd" in text and not wrong_ordinals(text), wrong_ordinals(text)


def test_one_prompt_one_repeat_is_singular_in_the_compare_title_and_the_bench_table():
    from explorer import bench
    from explorer.viz.compare import compare_figure

    report = {"rows": [{"system": "ar", "tokens_per_s": 10.0, "speedup_vs_ar": 1.0}],
              "meta": {"model": "m", "prompts": 1, "repeats": 1}}
    title = compare_figure(report).layout.title.text
    assert "1 prompt × 1 repeat" in title and "prompts" not in title and "repeats" not in title
    table = bench.markdown(report)
    assert "1 prompt × 1 repeat" in table and "1 prompts" not in table and "1 repeats" not in table
    report["meta"] |= {"prompts": 3, "repeats": 2}
    assert "3 prompts × 2 repeats" in compare_figure(report).layout.title.text


def test_beam_banner_says_what_the_004_rule_is():
    banner = viz.method_banner("beam", explorer.METHODS["beam"])
    assert "004" in banner and "Tulsian" in banner  # the reproduction report the rule comes from, by its authors


def test_cli_summary_tells_acceptance_from_alpha_hat_and_says_what_r_d_and_hm_are():
    from explorer.cli.run import summary_line

    plan = [(4, 1), (4, 0), (4, 4)]  # 5 of 12 drafted accepted; the refused ones' followers go untested
    trace = make_trace("beta-ts", plan, v_d=5 / 12, r_d=5 / 8, hm=0.5)
    trace = dataclasses.replace(trace, summary=dataclasses.replace(trace.summary, alpha_hat=5 / 7))
    line = summary_line(trace)
    assert "42% of drafted tokens accepted" in line
    assert "α̂ 0.71" in line and "tested" in line  # the figure the theory uses, and why it differs
    assert "r_d 62% (the share of the output the draft wrote)" in line
    assert "HM 50% (harmonic mean of v_d and r_d)" in line


def test_bench_help_prints_every_system_the_registry_knows_and_helps_every_number(capsys):
    from explorer.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for syntax in [m.syntax() for m in methods.discover().values()] + ["hf-generate", "hf-assisted:"]:
        assert syntax in text, syntax
    for flag in ("--repeats", "--gamma", "--temperature"):
        after = text.split(flag, 2)[2] if text.count(flag) > 1 else text.split(flag, 1)[1]
        assert re.match(r" [A-Z_]+ \w", after) and not re.match(r" [A-Z_]+ --", after), flag  # words follow the flag


def test_an_audit_that_cannot_fail_says_so_and_how_to_give_it_power(tiny_target):
    from explorer.audit import sampling_audit
    from explorer.viz.audit import sampling_audit_text

    audit = sampling_audit(tiny_target, prompt_ids=[3, 4, 5], runs=40, temperature=0.05, draft="model:tiny-random:2:1")
    text = sampling_audit_text(audit, lossy=False)
    assert len(audit.bins) == 1 and "Consistent" not in text
    assert "cannot fail" in text and "temperature" in text and "1 degrees" not in text
    assert re.search(r"set the temperature to \d", text)  # one that gives the test something to compare
    powered = sampling_audit(tiny_target, prompt_ids=[3, 4, 5], runs=40, temperature=1.0, draft="model:tiny-random:2:1")
    assert len(powered.bins) >= 2 and "cannot fail" not in sampling_audit_text(powered, lossy=False)


def test_audit_says_how_first_tokens_came_about_in_whole_sentences():
    from explorer.audit import SamplingAudit
    from explorer.viz.audit import sampling_audit_text

    audit = SamplingAudit(runs=20, temperature=1.0, chi2=3.1, dof=2, p_value=0.21, bins=((1, 10, 9.0), (2, 6, 7.0),
                          (None, 4, 4.0)), impossible=0, paths={"corrected": 15, "accepted": 5}, token_text={})
    text = sampling_audit_text(audit, lossy=False)
    assert "in 20" not in text and "in 15" not in text
    assert "In 15 of the 20 runs the target refused the draft's first token and drew its own correction" in text
    assert "in 5 it accepted the draft's token" in text and "2 degrees of freedom" in text


def test_no_sentence_the_page_writes_counts_in_word_s():
    """'44 token(s)' reads as a form, not a sentence: every count the views, the summary and the page's handlers
    write takes its number (``plural``). Read from the source, so a new view is held to it too."""
    package = __import__("pathlib").Path(explorer.__file__).parent
    found = [f"{path.relative_to(package)}:{i}" for folder in ("viz", "ui", "cli")
             for path in sorted((package / folder).rglob("*.py"))
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"(?<= )[a-z]+\(s\)", line) and "palindrome(s)" not in line]
    assert not found, found
