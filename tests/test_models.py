"""Model loading: every spec form, and every bad one gives a clear error quickly."""

import time

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import explorer
from explorer.models import CharTokenizer, cache_root, default_gguf_path


def test_tiny_random_is_deterministic_and_seeds_differ():
    a, b, c = (explorer.load(s) for s in ("tiny-random:4", "tiny-random:4", "tiny-random:5"))
    wa, wb, wc = (m.model.lm_head.weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)
    assert a.vocab_size == len(CharTokenizer.ALPHABET)
    assert len(explorer.load("tiny-random:0:3").model.model.layers) == 3


def test_default_model_is_the_embedded_smollm2(default_model):
    cfg = default_model.model.config
    assert (cfg.num_hidden_layers, cfg.hidden_size, default_model.vocab_size) == (30, 576, 49152)
    assert default_model.dtype == torch.float32 and default_model.device.type == "cpu"
    assert default_model.decode(default_model.encode("Paris", chat=False)) == "Paris"
    assert default_gguf_path() is not None
    assert (cache_root() / "SmolLM2-135M-Instruct-f32" / "model.safetensors").is_file()


def test_default_model_loads_from_the_cache_in_under_two_seconds(default_model):
    start = time.perf_counter()
    explorer.load("default")
    assert time.perf_counter() - start < 2.0


def test_a_transformers_object_with_or_without_tokenizer():
    config = LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1)
    torch.manual_seed(0)
    target, draft = LlamaForCausalLM(config).eval(), LlamaForCausalLM(config).eval()
    trace = explorer.decode(target, prompt_ids=[1, 2, 3], draft=draft, temperature=1.0, seed=7, max_new_tokens=8)
    assert trace.method == "speculative" and len(trace.output_ids) == 8
    assert all(0 <= i < 40 for i in trace.output_ids)
    with pytest.raises(explorer.ExplorerError, match="no tokenizer"):
        explorer.decode(target, "text needs a tokenizer")


@pytest.mark.parametrize("spec,message", [
    ("", "empty"), ("gpt-17", "unknown model"), ("hf:nodash", "not a Hub id"),
    ("tiny-random:x", "bad tiny-random"), ("tiny-random:1:99", "bad tiny-random"),
])
def test_bad_specs_are_refused(spec, message):
    with pytest.raises(explorer.ModelLoadError, match=message):
        explorer.load(spec)


def test_hub_model_offline_fails_within_seconds(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(explorer.ModelLoadError, match="HF_HUB_OFFLINE"):
        explorer.load("hf:HuggingFaceTB/SmolLM2-360M-Instruct")
    assert time.perf_counter() - start < 10


def test_hub_model_without_network_fails_within_seconds(monkeypatch):
    """This machine reaches no model hub: the loader must say so quickly, not hang."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    start = time.perf_counter()
    with pytest.raises(explorer.ModelLoadError, match="unreachable|does not exist"):
        explorer.load("hf:HuggingFaceTB/SmolLM2-360M-Instruct")
    assert time.perf_counter() - start < 20


@pytest.mark.skipif(torch.cuda.is_available(), reason="this checks the refusal on a machine without CUDA")
def test_cuda_on_a_cpu_machine_is_refused():
    with pytest.raises(explorer.ModelLoadError, match="no CUDA"):
        explorer.load("tiny-random", device="cuda")


def test_dtype_choice():
    assert explorer.load("tiny-random", dtype="bf16").dtype == torch.bfloat16
    with pytest.raises(explorer.ModelLoadError, match="unknown dtype"):
        explorer.load("tiny-random", dtype="int3")
