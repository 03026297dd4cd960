"""bfloat16 as an option (#26): the target loads in bf16 with its float32 fingerprint (so the shipped drafts
still fit), decodes on the fast path with the kernels its CPU runs for bf16, and a lossless method equals
plain decoding *in bf16*: that is the target a bf16 run is exact against."""

import explorer
from explorer.api import load_cached
from explorer.artifacts import fingerprint


def test_one_model_per_resolved_dtype():
    """dtype None is float32 on the CPU: the page's explicit "float32" and the API's default share a model."""
    assert load_cached("tiny-random:41", None, None) is load_cached("tiny-random:41", "cpu", "float32")
    assert load_cached("tiny-random:41", None, "bfloat16") is not load_cached("tiny-random:41", None, None)


def test_bf16_keeps_the_fingerprint_and_is_lossless_against_bf16_plain_decoding(default_model):
    bf16 = load_cached("default", "cpu", "bfloat16")
    assert str(bf16.dtype) == "torch.bfloat16"
    assert fingerprint(bf16.model) == fingerprint(default_model.model)  # the shipped drafts are found
    prompt = "Rewrite this Python function with type hints and a docstring: def add(a, b): return a + b"
    ar = explorer.decode(bf16, prompt, method="ar", max_new_tokens=24)
    assert ar.dtype == "bfloat16"
    for method, draft in (("speculative", "prompt-lookup:3"), ("eesd", None)):
        run = explorer.decode(bf16, prompt, method=method, draft=draft, max_new_tokens=24)
        assert run.output_ids == ar.output_ids, (method, draft)
        if method == "eesd":
            assert "trained exit layer" in run.draft_about
