"""The bounds a public Space needs (``explorer/limits.py``): bad values get one line, memory stays bounded,
``hf:`` cannot reach the server's files, and a closed page's trace file goes."""

from __future__ import annotations

import os
import time

import pytest
from helpers import run_cli

import explorer
from explorer import api, limits, models


@pytest.mark.parametrize("kwargs, message", [
    ({"model": 5}, "a spec string such as 'default', got int 5"),
    ({"model": "x" * 10_000}, "the model spec has 10000 characters (at most 200)"),
    ({"draft": "banana:" * 2000}, "the draft spec has 14000 characters (at most 200)"),
    ({"seed": 2**70, "temperature": 1.0}, "seed must be a whole number from 0 to 2^63 - 1"),
    ({"seed": -1}, "seed must be a whole number from 0 to 2^63 - 1"),
    ({"prompt": "hi \ud83d there"}, "character 4 is a lone surrogate"),
    ({"prompt": "a" * (limits.MAX_PROMPT_CHARS + 1)}, f"the limit is {limits.MAX_PROMPT_CHARS}"),
    ({"gamma": 100, "draft": "prompt-lookup:2"}, "gamma must be a whole number from 1 to 64, got 100"),
    ({"max_new_tokens": 100_000}, f"max_new_tokens must be a whole number from 1 to {limits.MAX_NEW_TOKENS}"),
])
def test_bad_values_are_one_short_line(kwargs, message):
    args = {"model": "tiny-random", "prompt": "hi", "max_new_tokens": 2, **kwargs}
    with pytest.raises(explorer.ExplorerError) as caught:
        explorer.decode(args.pop("model"), args.pop("prompt"), **args)
    text = str(caught.value)
    assert message in text and "\n" not in text and len(text) < 300


def test_the_cli_answers_a_huge_seed_with_one_line_and_exit_2():
    out = run_cli("run", "--model", "tiny-random", "--prompt", "hi", "--temperature", "1", "--seed", str(2**70),
                  "--max-new-tokens", "2")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0 and "seed must be a whole number" in out.stderr


@pytest.mark.parametrize("spec, message", [
    ("hf:../mdl", "is not a Hub id"),
    ("hf:a/b/c", "is not a Hub id"),
    ("hf:.hidden/x", "is not a Hub id"),
    ("hf:tests/data", "names a folder on this server"),  # relative to the working directory
])
def test_hf_takes_hub_ids_only(spec, message, monkeypatch):
    monkeypatch.chdir(os.path.dirname(os.path.dirname(__file__)))
    with pytest.raises(explorer.ModelLoadError, match=message):
        explorer.load(spec)


def test_the_hf_allow_list_refuses_other_ids(monkeypatch):
    monkeypatch.setenv("EXPLORER_HF_ALLOW", "HuggingFaceTB/SmolLM2-135M-Instruct")
    with pytest.raises(explorer.ModelLoadError, match="not allowed here.*EXPLORER_HF_ALLOW"):
        explorer.load("hf:someone/huge-model")
    monkeypatch.setenv("EXPLORER_HF_ALLOW", "*")
    assert limits.hf_allow_list() is None


def test_a_bad_limit_in_the_environment_keeps_the_default(monkeypatch, caplog):
    monkeypatch.setenv("EXPLORER_MAX_NEW_TOKENS", "lots")
    assert limits._env_int("EXPLORER_MAX_NEW_TOKENS", 4096, 1, 32768) == 4096
    monkeypatch.setenv("EXPLORER_MAX_NEW_TOKENS", "0")
    assert limits._env_int("EXPLORER_MAX_NEW_TOKENS", 4096, 1, 32768) == 4096
    monkeypatch.setenv("EXPLORER_MAX_NEW_TOKENS", "512")
    assert limits._env_int("EXPLORER_MAX_NEW_TOKENS", 4096, 1, 32768) == 512


def test_loaded_models_stay_within_the_byte_budget(monkeypatch):
    """200 distinct specs used to stay loaded for good (+226 MB); now the least recently used go."""
    one = api.model_bytes(api.load_cached("tiny-random:101", None, None))
    pinned = sum(api.model_bytes(m) for key, m in api._LOADED.items() if key[0] in api.PINNED)  # the default stays
    monkeypatch.setattr(api, "MODEL_CACHE_BYTES", pinned + 3 * one)
    for seed in range(102, 110):
        api.load_cached(f"tiny-random:{seed}", None, None)
    kept = [key[0] for key in api._LOADED]
    assert sum(api.model_bytes(m) for m in api._LOADED.values()) <= pinned + 3 * one
    assert kept[-3:] == ["tiny-random:107", "tiny-random:108", "tiny-random:109"]
    again = api.load_cached("tiny-random:108", None, None)  # a hit moves to the end and loads nothing
    assert again is api._LOADED[("tiny-random:108", "cpu", "torch.float32")] and list(api._LOADED)[-1][0] == "tiny-random:108"


def test_a_cache_hit_walks_no_model(monkeypatch):
    """The budget is checked on every hit, and it walked every cached model's modules each time: with the default,
    its copy and 30 tiny models cached a hit took 3.8 ms, a tiny model's 4-token decode 20 ms instead of 9 (the
    suite's χ² tests ran at half speed). A model's tensors and its fast view are counted once."""
    import torch

    api.load_cached("tiny-random:101", None, None)
    explorer.decode("tiny-random:101", "ab", max_new_tokens=2)  # its fast view: the packed forms count too
    counted = {key: api.model_bytes(m) for key, m in api._LOADED.items()}

    def walked(*args, **kwargs):
        raise AssertionError("a cache hit walked a model's modules")

    monkeypatch.setattr(torch.nn.Module, "named_modules", walked)
    again = api.load_cached("tiny-random:101", None, None)
    assert {key: api.model_bytes(m) for key, m in api._LOADED.items()} == counted and api.model_bytes(again) > 0


def test_a_closed_pages_trace_file_goes_and_stale_ones_expire(tmp_path, monkeypatch):
    from explorer.ui import handlers, trace_files

    monkeypatch.setattr(trace_files, "TRACE_DIR", tmp_path)
    trace = explorer.decode("tiny-random", "hi", max_new_tokens=2)
    mine = trace_files.write_trace_file(trace, "session-a")
    other = trace_files.write_trace_file(trace, "session-b")
    assert mine.is_file() and other.is_file()
    handlers.forget_session(type("Request", (), {"session_hash": "session-a"})())
    assert not mine.parent.exists() and other.is_file()
    old = time.time() - trace_files.MAX_AGE_S - 10
    os.utime(other.parent, (old, old))
    trace_files.write_trace_file(trace, "session-c")  # writing cleans what is stale
    assert not other.parent.exists()


def test_every_limit_is_stated_in_security_md():
    security = open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "SECURITY.md"), encoding="utf-8").read()
    for variable in ("EXPLORER_MAX_NEW_TOKENS", "EXPLORER_MAX_PROMPT_CHARS", "EXPLORER_MAX_TRACE_MB",
                     "EXPLORER_MAX_TRACE_ROUNDS", "EXPLORER_MAX_TRACE_TOKENS", "EXPLORER_MODEL_CACHE_MB",
                     "EXPLORER_HF_ALLOW", "EXPLORER_HF_MAX_PARAMS_M", "EXPLORER_SESSION_TRACES_MB",
                     "EXPLORER_STORED_TRACES_MB", "EXPLORER_UPLOADS_MB"):
        assert variable in security
        assert variable in open(limits.__file__, encoding="utf-8").read()
    assert models.check_hub_id("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"
