"""Model pairs (``explorer.pairs``): the GPU pair's wiring offline through its tiny stand-in (CLI run and
bench, the page's button), the Space's size cap and allow-list raised for its target only where a GPU is
present, and the page's words on why drafting pays there."""

from __future__ import annotations

import json

import pytest

from explorer import cli, limits
from explorer.errors import ExplorerError
from explorer.models.hub import check_hub_id
from explorer.pairs import GPU_PAIR, PAIRS, get_pair
from explorer.ui import layout

TARGET = limits.GPU_PAIR_TARGET


@pytest.fixture
def on_a_space(monkeypatch):
    monkeypatch.setattr(limits, "ON_SPACE", True)
    monkeypatch.setattr(limits, "HF_MAX_PARAMS", 1000 * 10**6)
    for name in ("EXPLORER_HF_ALLOW", "EXPLORER_HF_MAX_PARAMS_M", "SPACES_ZERO_GPU"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    return monkeypatch


def test_a_space_loads_the_pairs_target_only_where_a_gpu_is_present(on_a_space):
    assert not limits.gpu_present() and limits.hf_max_params() == 1000 * 10**6
    with pytest.raises(ExplorerError, match="not allowed here"):
        check_hub_id(TARGET)
    on_a_space.setenv("SPACES_ZERO_GPU", "true")  # a ZeroGPU Space
    assert limits.gpu_present() and limits.hf_max_params() == 2000 * 10**6
    assert check_hub_id(TARGET) == TARGET
    on_a_space.delenv("SPACES_ZERO_GPU")
    on_a_space.setattr("torch.cuda.is_available", lambda: True)  # a dedicated GPU
    assert TARGET in limits.hf_allow_list() and limits.hf_max_params() == 2000 * 10**6
    on_a_space.setenv("EXPLORER_HF_MAX_PARAMS_M", "500")  # the operator's own cap stands
    assert limits.hf_max_params() == limits.HF_MAX_PARAMS


def test_the_pair_says_why_drafting_pays_from_its_size_ratio():
    pair = get_pair(GPU_PAIR)
    assert pair.target == f"hf:{TARGET}" and pair.drafts == ("model:default", "prompt-lookup:3")
    assert pair.c == pytest.approx(135 / 1711)
    words = pair.why()
    assert "c ≈ 135 M / 1,711 M ≈ 0.08" in words and "Theorem 3.8 gives 1.75×" in words  # α 0.6, γ 4
    with pytest.raises(ExplorerError, match="unknown pair 'nope': use one of smollm2-1.7b, tiny"):
        get_pair("nope")


def test_the_cli_runs_the_tiny_pair_losslessly_and_refuses_a_pair_with_a_model(capsys):
    assert cli.main(["run", "--pair", "tiny", "--prompt", "hello there hello there", "--max-new-tokens", "16",
                     "--out", "-"]) == 0
    out = capsys.readouterr()
    trace = json.loads(out.out)
    assert trace["model"] == "tiny-random:1" and trace["draft"] == "model:tiny-random:1:1"
    assert "pair tiny:" in out.err
    assert cli.main(["run", "--model", "tiny-random:1", "--prompt", "hello there hello there", "--max-new-tokens",
                     "16", "--out", "-"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert [t for r in trace["rounds"] for t in r["emitted"]] == [t for r in plain["rounds"] for t in r["emitted"]]
    assert cli.main(["run", "--pair", "tiny", "--model", "default", "--prompt", "hi"]) != 0
    assert "give --pair or --model, not both" in capsys.readouterr().err


def test_the_bench_takes_the_pairs_drafts(tmp_path, monkeypatch):
    from explorer import bench

    # prompts the tiny models can spell (the shipped ones have characters outside their alphabet)
    monkeypatch.setattr(bench, "load_prompts", lambda: [{"category": "chat", "text": "hello there hello there"}])
    out = tmp_path / "pair.json"
    assert cli.main(["bench", "--pair", "tiny", "--quick", "--max-new-tokens", "8", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    names = [row["system"] for row in report["rows"]]
    assert names == ["hf-generate", "ar", "speculative:model:tiny-random:1:1", "speculative:prompt-lookup:3"]
    assert report["meta"]["model"] == "tiny-random:1"


def test_the_page_offers_the_pair_only_where_a_gpu_is_present(monkeypatch):
    hidden = layout.build_demo()
    handlers = next(f.fn for f in hidden.fns.values() if f.name == "run").__wrapped__.__self__
    assert handlers.page.pair_btn.visible is False
    monkeypatch.setattr(layout, "gpu_present", lambda: True)
    shown = layout.build_demo()
    handlers = next(f.fn for f in shown.fns.values() if f.name == "run").__wrapped__.__self__
    page = handlers.page
    assert page.pair_btn.visible is True and "SmolLM2-1.7B-Instruct" in page.pair_btn.value
    updates = handlers.use_pair()
    assert updates[page.model] == PAIRS[GPU_PAIR].target and updates[page.method] == "speculative"
    assert updates[page.draft].value == "model:default" and updates[page.gamma].value == 4
    said = updates[page.status].replace("\\", "")  # Markdown's escapes
    assert "c ≈ 135 M / 1,711 M ≈ 0.08" in said and "from the Hub on first use (3.4 GB)" in said
