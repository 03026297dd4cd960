"""One-time work is said on the page while a run waits for it (#48: 65 s on "Loading default and encoding the
prompt…" while only the server's terminal said why): ``explorer.notices`` keeps what the work announces, and the run
handler, waiting on a thread, shows the newest line without the server's folders."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from helpers import page_handlers, run_values

import explorer
from explorer import notices
from explorer.engine import kernels
from explorer.ui.waiting import for_the_page, waiting


def test_an_announcement_reaches_a_waiting_page_without_the_servers_folders(capsys):
    def work():
        kernels.say("Choosing this CPU's matrix kernels for a 135 M-weight model once (≤ 10 s; kept in "
                    "/root/.cache/spec-explorer/kernels) …")
        time.sleep(1.2)
        return 42

    said = []
    steps = waiting(work, lambda seconds, line: said.append((seconds, line)) or {}, every=0.2)
    with pytest.raises(StopIteration) as done:
        while True:
            next(steps)
    assert done.value.value == 42
    assert said and said[-1][1] == "Choosing this CPU's matrix kernels for a 135 M-weight model once (≤ 10 s) …"
    assert "kept in" in capsys.readouterr().err  # the terminal still hears all of it
    assert for_the_page("Converting x.gguf to float32 once (about 20 s on 2 CPU cores); cached in /a/b") == \
        "Converting x.gguf to float32 once (about 20 s on 2 CPU cores)"


def test_an_error_in_the_work_is_raised_where_the_handler_waits():
    def work():
        raise explorer.ExplorerError("no such model")

    with pytest.raises(explorer.ExplorerError, match="no such model"):
        list(waiting(work, lambda *_: {}, every=0.05))


def test_a_run_waiting_on_one_time_work_says_what_it_is(tiny_target, monkeypatch):
    """The page's run, while its decode is being started: the status names the one-time work and how long it has
    waited (the load is held back here by a stand-in that announces, as the conversion and the compile do)."""
    real = explorer.stream

    def slow_stream(*args, **kwargs):
        notices.announce("Compiling the decoder layer for this CPU once (≈ 10–30 s on 2 cores; kept in /x/y) …")
        time.sleep(1.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(explorer, "stream", slow_stream)
    handlers = page_handlers()
    page = handlers.page
    values = run_values(page, {page.model: "tiny-random", page.prompt: "abc", page.max_new_tokens: 4,
                               page.method: "speculative", page.draft: "model:tiny-random:2:1"})
    statuses = [u[page.status] for u in handlers.run(values, SimpleNamespace(session_hash="waiting-test"))
                if page.status in u]
    waited = [s for s in statuses if "One-time work on this machine" in s]
    assert waited and "Compiling the decoder layer for this CPU once" in waited[-1] and "/x/y" not in waited[-1]
    assert waited[-1].startswith("◷ Loading tiny") and " s\n" in waited[-1]
