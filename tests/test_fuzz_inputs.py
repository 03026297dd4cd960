"""Every parameter of the API's ``decode`` and of the CLI's ``run``, given wrong types, huge and odd
unicode values: one line of at most 300 characters (CLI: exit 2), never a traceback (issue 28, item 7)."""

from __future__ import annotations

import logging

import pytest
from conftest_ui import served_app

from explorer.cli import main
from explorer.tools.soak_clients import page_client

HUGE = "x" * 100_000
ODD = ["\u202e\u0000abc", "🙂" * 500, "\ud800", HUGE, "9" * 5000, "-1", "nan", "1e400"]
WRONG = [[1, 2], {"a": 1}, True, 1e300, -(10**30)]

# (parameter, base value): the API's decode in its order; tiny models keep every call quick
API = [("prompt", "abc"), ("method", "speculative"), ("draft", "model:tiny-random:2:1"), ("gamma", 2),
       ("temperature", 0.0), ("max_new_tokens", 4), ("seed", 0), ("model", "tiny-random:1")]


@pytest.fixture(scope="module")
def client():
    with served_app() as (_, url):
        yield page_client(url)


def one_line(message: str) -> None:
    assert "\n" not in message.strip() and len(message.strip()) <= 300, message[:400]
    assert "Traceback" not in message


@pytest.mark.parametrize("name", [name for name, _ in API])
def test_each_api_parameter_refuses_bad_values_in_one_line(client, caplog, name):
    refused = 0
    for value in ODD + WRONG:
        args = [value if n == name else base for n, base in API]
        with caplog.at_level(logging.ERROR):
            try:
                client.predict(*args, api_name="/decode")
                continue  # some odd values are fine for some parameters (a prompt may be any text)
            except Exception as err:  # the client raises the server's one line
                message = str(err)
        refused += 1
        one_line(message)
        assert "went wrong on the server" not in message, (name, repr(value)[:60], message)
    assert refused >= 3, name
    assert not [r for r in caplog.records if "failed" in r.getMessage()], "an unexpected error was logged"


CLI = ["--prompt", "--model", "--method", "--draft", "--gamma", "--controller", "--temperature", "--top-k", "--top-p",
       "--max-new-tokens", "--seed", "--prompt-ids", "--device", "--dtype"]


@pytest.mark.parametrize("flag", CLI)
def test_each_cli_flag_refuses_bad_values_with_exit_2_and_one_line(flag, capsys):
    base = {"--prompt": "abc", "--model": "tiny-random:1", "--draft": "model:tiny-random:2:1", "--max-new-tokens": "4"}
    refused = 0
    for value in ODD:
        args = {**base, flag: value}
        if flag == "--prompt-ids":
            args.pop("--prompt")
        argv = ["run"] + [part for pair in args.items() for part in pair]
        try:
            status = main(argv)
        except SystemExit as exit:
            status = exit.code
        out, err = capsys.readouterr()
        if status == 0:
            continue
        refused += 1
        assert status == 2, (flag, repr(value)[:60], err[-300:])
        one_line(err)
    assert refused >= 3, flag
