"""Issue 51, item 3: the default model is never evicted by visitors' models; the low-bit copies count in the model
byte budget; a visitor's model loads are bounded.

Before: 70 ``/decode`` calls with distinct ``tiny-random:N:16`` pushed the default out of the 32-model cache (the next
visitor's one-token default decode took 12.4 s instead of ≈ 1 s), and the default's two low-bit copies (≈ 0.5 GB)
were built after its load and never counted."""

from __future__ import annotations

from collections import OrderedDict
from types import SimpleNamespace

import pytest

import explorer
from explorer import api
from explorer.errors import ExplorerError
from explorer.limits import VISITOR_MODEL_LOADS


@pytest.fixture
def cache():
    """The model cache as the test found it, given back afterwards (the session's default stays for the others)."""
    kept = OrderedDict(api._LOADED)
    loads = OrderedDict(api._LOADS)
    try:
        yield
    finally:
        api._LOADED.clear()
        api._LOADED.update(kept)
        api._LOADS.clear()
        api._LOADS.update(loads)


def test_the_default_is_pinned():
    assert "default" in api.PINNED


def test_a_pinned_model_outlives_70_visitors_models(cache, monkeypatch):
    """The mechanism on a tiny stand-in for the default (the real one: the model-marked test below)."""
    monkeypatch.setattr(api, "PINNED", frozenset({"tiny-random:5100"}))
    pinned = api.load_cached("tiny-random:5100", None, None)
    for k in range(70):
        api.load_cached(f"tiny-random:{5101 + k}:2", None, None)
        assert len(api._LOADED) <= api.MAX_CACHED_MODELS
    assert api.load_cached("tiny-random:5100", None, None) is pinned  # the same object: never evicted, never reloaded
    assert ("tiny-random:5100", "cpu", "torch.float32") in api._LOADED


def test_the_byte_budget_evicts_around_a_pinned_model(cache, monkeypatch):
    monkeypatch.setattr(api, "PINNED", frozenset({"tiny-random:5200"}))
    pinned = api.load_cached("tiny-random:5200", None, None)
    monkeypatch.setattr(api, "MODEL_CACHE_BYTES", 1)  # smaller than any model: everything else goes
    newest = api.load_cached("tiny-random:5201", None, None)
    assert set(api._LOADED.values()) >= {pinned, newest}
    api.load_cached("tiny-random:5202", None, None)
    assert pinned in api._LOADED.values() and newest not in api._LOADED.values()


def test_the_low_bit_copies_count_in_the_byte_budget(cache):
    from explorer.methods.quantized.lowbit_copy import copies_bytes, lowbit_copy

    target = api.load_cached("tiny-random:5300:4", None, None)
    before = api.model_bytes(target)
    assert copies_bytes(target.model) == 0
    copy = lowbit_copy(target, "int4")
    assert copies_bytes(target.model) >= copy.decoder.weight_bytes() > 0
    lowbit_copy(target, "int8")
    assert api.model_bytes(target) >= before + copies_bytes(target.model) > before


def test_a_copy_built_after_the_load_is_evicted_for_at_the_next_call(cache, monkeypatch):
    """The budget is checked on every call, a cached one too: a copy built during a decode counts from the next."""
    from explorer.methods.quantized.lowbit_copy import lowbit_copy

    first = api.load_cached("tiny-random:5400:4", None, None)
    second = api.load_cached("tiny-random:5401:4", None, None)
    monkeypatch.setattr(api, "MODEL_CACHE_BYTES", api.model_bytes(first) + api.model_bytes(second))
    lowbit_copy(second, "int4")  # now the two are over the budget
    api.load_cached("tiny-random:5401:4", None, None)
    assert first not in api._LOADED.values() and second in api._LOADED.values()


def test_a_visitors_loads_are_bounded_and_said_in_one_line(cache):
    with api.loads_by("ip:203.0.113.9"):
        for k in range(VISITOR_MODEL_LOADS):
            api.load_cached(f"tiny-random:{5500 + k}", None, None)
        api.load_cached("tiny-random:5500", None, None)  # already loaded: not a load
        with pytest.raises(ExplorerError) as refused:
            api.load_cached("tiny-random:5600", None, None)
    said = str(refused.value)
    assert "\n" not in said and len(said) <= 300 and f"loaded {VISITOR_MODEL_LOADS} models" in said
    assert "try again in" in said
    with api.loads_by("ip:203.0.113.10"):  # another visitor loads as before
        api.load_cached("tiny-random:5600", None, None)
    api.load_cached("tiny-random:5601", None, None)  # the Python API and the CLI: the owner, unbounded


def test_the_apps_decode_counts_loads_by_visitor(cache):
    """/decode (through its gate, as the app wires it): the 9th new model of one client is refused in one line; MCP
    callers are one visitor; another address is another visitor."""
    import gradio as gr

    from explorer.ui.api_handlers import ApiDecode
    from explorer.ui.jobs import gated

    decode = gated(ApiDecode().api_decode)
    one = SimpleNamespace(session_hash="s1", headers={}, client=SimpleNamespace(host="198.51.100.7"))
    for k in range(VISITOR_MODEL_LOADS):
        list(decode("abc", "ar", None, 4, 0.0, 1, 0, f"tiny-random:{5700 + k}", request=one))
    fresh_tab = SimpleNamespace(session_hash="s2", headers={}, client=SimpleNamespace(host="198.51.100.7"))
    with pytest.raises(gr.Error) as refused:  # a new tab of the same visitor: the same count
        list(decode("abc", "ar", None, 4, 0.0, 1, 0, "tiny-random:5800", request=fresh_tab))
    assert "models in the last" in refused.value.message
    other = SimpleNamespace(session_hash="s3", headers={}, client=SimpleNamespace(host="198.51.100.8"))
    list(decode("abc", "ar", None, 4, 0.0, 1, 0, "tiny-random:5800", request=other))


@pytest.mark.model
def test_the_real_default_outlives_70_tiny_models_from_a_visitor(cache):
    default = api.load_cached("default", None, None)
    for k in range(70):
        with api.loads_by(f"ip:192.0.2.{k}"):  # 70 visitors, so that no visitor's bound stops them first
            api.load_cached(f"tiny-random:{6000 + k}:16", None, None)
    assert api.load_cached("default", None, None) is default
    assert explorer.decode("default", "Hi", max_new_tokens=1).summary.new_tokens == 1
