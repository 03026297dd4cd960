"""The app through its API (``gradio_client``) and its page definition, served in this process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest_ui import free_port, served_app

import explorer
from explorer.tools import soak_adversarial
from explorer.tools.soak_adversarial import PRIVATE
from explorer.tools.soak_clients import page_client

ROOT = Path(__file__).resolve().parent.parent
CONTRACT_IDS = ["prompt", "run", "stop", "round-slider", "tokens", "round-detail", "latency-plot", "theory-plot",
                "trace-download", "trace-upload"]


@pytest.fixture(scope="module")
def served():
    with served_app() as (demo, url):
        yield demo, url


@pytest.fixture(scope="module")
def client(served):
    return page_client(served[1])


def test_decode_is_the_one_mcp_tool_with_documented_typed_parameters(served):
    """Gradio's MCP server (gradio[mcp], in requirements.txt) lists `decode` and nothing of the UI."""
    import asyncio
    import json

    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    schema = json.loads(urllib.request.urlopen(served[1] + "gradio_api/mcp/schema", timeout=30).read())
    assert [tool["meta"]["endpoint_name"] for tool in schema] == ["decode"]
    properties = schema[0]["inputSchema"]["properties"]
    assert properties["gamma"]["type"] == "integer" and properties["temperature"]["type"] == "number"
    assert all(p.get("description") for p in properties.values()) and schema[0]["inputSchema"]["required"] == ["prompt"]

    async def call():
        async with streamablehttp_client(served[1] + "gradio_api/mcp/") as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                result = await session.call_tool(tools.tools[0].name, {
                    "prompt": "the cat", "method": "speculative", "draft": "model:tiny-random:2:1", "gamma": 3,
                    "temperature": 0, "max_new_tokens": 8, "seed": 0, "model": "tiny-random:1"})
                return [c.text for c in result.content if getattr(c, "text", None)]

    texts = asyncio.run(call())
    trace = explorer.load_trace(texts[-1])
    assert trace.method == "speculative" and len(trace.output_ids) == 8


SECRET = PRIVATE  # what caller A asks to repeat


def mcp_decode(url: str, prompt: str):
    return soak_adversarial.mcp_decode(url, prompt, "tiny-random:52")


def test_two_mcp_callers_never_see_each_others_text(served):
    """Issue 40, item 1: Gradio's MCP server sends every MCP call through one cached client with one session hash
    (its streamable HTTP transport is stateless: no mcp-session-id tells callers apart). Caller B, asking what A
    asked, must not get A's output as drafts from the history corpus nor see it in a round's `matched`."""
    first = mcp_decode(served[1], SECRET)
    second = mcp_decode(served[1], SECRET)
    assert first.output_ids == second.output_ids  # the same greedy answer: A's output would match B's at once
    assert [r.detail.get("source") for r in second.rounds if r.detail.get("source") == "history"] == []
    answer = list(first.output_ids)
    for r in second.rounds:
        matched = list(r.detail.get("matched", ()))
        assert r.detail.get("found_in") != "history" and (not matched or r.detail.get("source") != "history")
        assert not (len(matched) > 4 and any(answer[i:i + len(matched)] == matched for i in range(len(answer))))
    assert "earlier outputs" not in second.draft_about or "no earlier outputs" in second.draft_about


def test_an_api_client_drafts_from_its_own_outputs_only(served):
    """A gradio_client session keeps its own suffix history (its second call drafts from its first), and
    another client's session sees none of it."""
    mine, other = page_client(served[1]), page_client(served[1])
    args = (SECRET, "suffix", "", 4, 0.0, 24, 0, "tiny-random:52")
    first = explorer.load_trace(mine.predict(*args, api_name="/decode"))
    again = explorer.load_trace(mine.predict(*args, api_name="/decode"))
    theirs = explorer.load_trace(other.predict(*args, api_name="/decode"))
    assert first.output_ids == again.output_ids == theirs.output_ids
    assert any(r.detail.get("source") == "history" for r in again.rounds)
    assert not any(r.detail.get("source") == "history" for r in theirs.rounds)


def test_one_token_api_calls_do_not_evict_a_visitors_outputs(served, monkeypatch):
    """Issue 40, item 5: each fresh API client is a session of its own; more of them than the history holds must not
    push out what a page's visitor decoded (here the history holds 4 sessions, so 6 calls would have)."""
    from explorer.artifacts import fingerprint
    from explorer.methods.suffix.corpus import HISTORY

    monkeypatch.setattr(type(HISTORY), "MAX_SESSIONS", 4)
    fp = fingerprint(explorer.api.load_cached("tiny-random:52", None, None).model)
    HISTORY.add(fp, "a-visitors-page", [5, 6, 7])  # what the page's run keeps for its session
    for _ in range(6):
        page_client(served[1]).predict("abc", "suffix", "", 4, 0.0, 1, 0, "tiny-random:52", api_name="/decode")
    assert HISTORY.corpus(fp, "a-visitors-page", -1).tolist() == [5, 6, 7, -1]


def test_decode_returns_a_trace_that_loads(client):
    assert client.ssl_verify is False  # the page at http://127.0.0.1 has no certificate to check (``page_client``)
    out = client.predict("the quick brown fox", "speculative", "model:tiny-random:2:1", 3, 1.0, 24, 5, "tiny-random:1",
                         api_name="/decode")
    trace = explorer.load_trace(out)
    assert (trace.method, trace.model, trace.draft) == ("speculative", "tiny-random:1", "model:tiny-random:2:1")
    assert trace.settings.gamma == 3 and trace.settings.temperature == 1.0 and trace.settings.seed == 5
    assert trace.summary.new_tokens == 24 and trace.summary.stop_reason == "max_new_tokens"
    assert trace.prompt == "the quick brown fox"


def test_decode_takes_the_seven_contract_arguments_on_the_default_model(client):
    out = client.predict("What is 2 + 2?", "speculative", "prompt-lookup:2", 4, 0.0, 6, 0, api_name="/decode")
    trace = explorer.load_trace(out)
    assert trace.model == "default" and trace.draft == "prompt-lookup:2"
    assert 1 <= trace.summary.new_tokens <= 6 and trace.text.strip()


@pytest.mark.parametrize("args, message", [
    (("hi", "speculative", "early-exit:1", 0, 0.0, 8, 0), "gamma must be a whole number from 1 to 64, got 0"),
    (("hi", "medusa", "early-exit:1", 4, 0.0, 8, 0), "unknown method 'medusa'"),
    (("hi", "speculative", "early-exit:x", 4, 0.0, 8, 0), "bad draft 'early-exit:x'"),
    (("hi", "speculative", "early-exit:1", 2.5, 0.0, 8, 0), "γ (gamma) must be a whole number, got 2.5"),
    (("  ", "ar", None, 4, 0.0, 8, 0), "the prompt is empty"),
    (("hi", "ar", None, 4, 0.0, 0, 0), "max_new_tokens must be a whole number from 1 to"),
    (("hi", "ar", None, 4, -1.0, 8, 0), "temperature"),
])
def test_bad_inputs_come_back_as_one_readable_line(client, args, message):
    with pytest.raises(Exception) as caught:
        client.predict(*args, "tiny-random", api_name="/decode")
    text = str(caught.value)
    assert message in text
    assert "Traceback" not in text and "\n" not in text.strip()


def test_an_unknown_hub_model_fails_fast_offline(client):
    started = time.perf_counter()
    with pytest.raises(Exception, match="not in the local Hugging Face cache"):
        client.predict("hi", "ar", None, 4, 0.0, 4, 0, "hf:nobody/no-such-model", api_name="/decode")
    assert time.perf_counter() - started < 30


def test_three_clients_decode_at_once(served):
    def job(seed):
        c = page_client(served[1])
        return explorer.load_trace(c.predict("abc", "speculative", "model:tiny-random:2:1", 4, 1.0, 16, seed,
                                             "tiny-random:1", api_name="/decode"))

    with ThreadPoolExecutor(3) as pool:
        traces = list(pool.map(job, [1, 2, 3]))
    assert [t.settings.seed for t in traces] == [1, 2, 3]
    assert all(t.summary.new_tokens == 16 for t in traces)


def test_a_cancelled_api_decode_stops_between_rounds(client, monkeypatch):
    """job.cancel() frees the decode's concurrency slot at once, so the decode itself must stop too:
    the rounds the server decodes (counted on the real stream) stop growing soon after the cancel."""
    decoded = []
    real_stream = explorer.stream

    def counting_stream(*args, **kwargs):
        decoding = real_stream(*args, **kwargs)
        source = decoding._source
        decoding._source = ((decoded.append(record.index) or (record, s)) for record, s in source)
        return decoding

    monkeypatch.setattr(explorer, "stream", counting_stream)
    job = client.submit("abc", "ar", None, 4, 0.0, 1000, 0, "tiny-random:1:16", api_name="/decode")
    deadline = time.monotonic() + 60
    while len(decoded) < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(decoded) >= 5, "the decode did not start"
    job.cancel()
    time.sleep(1.0)  # a round in flight when the cancel arrived may still finish
    after_cancel = len(decoded)
    time.sleep(1.5)
    assert len(decoded) == after_cancel < 1000


def test_the_page_has_the_contract_ids_and_lists_every_method(served):
    demo, _ = served
    components = {c.get("props", {}).get("elem_id"): c for c in demo.config["components"]}
    assert set(CONTRACT_IDS) <= set(components)
    choices = [value for _, value in components["method"]["props"]["choices"]]
    assert choices == list(explorer.METHODS)
    api = {d.get("api_name") for d in demo.config["dependencies"] if d.get("api_visibility", "public") == "public"}
    assert "decode" in api


def test_python_app_py_serves_on_the_port_from_the_environment():
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port), "EXPLORER_PRELOAD": ""}
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
                    assert response.status == 200
                    assert "Speculative Decoding Explorer" in response.read().decode()
                    break
            except OSError:
                assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
                assert time.monotonic() < deadline, "app.py did not serve within 120 s"
                time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
