"""The Hugging Face Hub: ``hf:ORG/NAME`` loading (local Hub cache first, then the network), the id check
that keeps ``hf:`` to Hub ids this process may load, and the reachability and size check made before a
download."""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch

from .. import limits
from ..errors import ModelLoadError

DEFAULT_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the default model's Hub id (``models.default`` loads it)


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}


def load_hub(repo: str, dtype: torch.dtype):
    """Local Hub cache first (works offline), then the network with a short timeout."""
    from transformers import AutoModelForCausalLM

    repo = check_hub_id(repo)
    try:
        model = AutoModelForCausalLM.from_pretrained(repo, dtype=dtype, local_files_only=True)
        return model, _hub_tokenizer(repo, local_only=True)
    except (OSError, ValueError):
        pass
    if hub_offline():
        raise ModelLoadError(
            f"hf:{repo} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set: "
            "connect to the network or use the model 'default'"
        )
    _check_hub_reachable(repo)
    try:
        model = AutoModelForCausalLM.from_pretrained(repo, dtype=dtype)
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"hf:{repo} could not be loaded as a causal LM: {first_line(err)}") from None
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
            f"({first_line(err)}): use the model 'default' offline"
        ) from None
    params = getattr(getattr(info, "safetensors", None), "total", None)
    most = limits.hf_max_params()
    if params is not None and params > most:
        raise ModelLoadError(f"hf:{repo} has {params / 1e6:,.0f} M parameters; this server loads at most "
                             f"{most / 1e6:,.0f} M (EXPLORER_HF_MAX_PARAMS_M)")


def _hub_tokenizer(repo: str, local_only: bool):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(repo, local_files_only=local_only)
    except (OSError, ValueError):
        return None  # a model without a tokenizer still decodes token ids


def first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:200] if text else type(err).__name__
