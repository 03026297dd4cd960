"""The Speculative Decoding Explorer in the browser: ``python app.py`` (what Hugging Face Spaces runs).

Serves on ``GRADIO_SERVER_NAME`` / ``GRADIO_SERVER_PORT`` when they are set (Gradio reads them).
Everything works offline: no analytics, no Hub calls unless a model asks for one.
"""

import os

# Offline by default (this project's machines reach no hub); on Hugging Face Spaces (SPACE_ID is set)
# the Hub stays reachable, which is where the default model and hf: models come from there.
# Set HF_HUB_OFFLINE=0 to use hf: models elsewhere.
_defaults = {"GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_DISABLE_TELEMETRY": "1"}
if "SPACE_ID" not in os.environ:
    _defaults["HF_HUB_OFFLINE"] = "1"
for _name, _value in _defaults.items():
    os.environ.setdefault(_name, _value)

if os.environ.get("SPACES_ZERO_GPU"):  # ZeroGPU patches torch: its package must come before torch's CUDA
    import spaces  # noqa: E402, F401

import threading  # noqa: E402  (the environment above must be set before gradio / huggingface_hub load)

import explorer  # noqa: E402
from explorer.ui import launch_options, serving_demo, zerogpu  # noqa: E402

demo = serving_demo()


def _load_for_zero_gpu(spec: str) -> None:
    """ZeroGPU's way: the weights go to "cuda" at start-up, outside any GPU function (ZeroGPU packs them and
    hands them to each GPU call); nothing may compute on the GPU here."""
    try:
        explorer.api.load_cached(spec, None, "float32")  # the page's default precision: the key its runs use
    except explorer.ExplorerError as err:
        print(f"note: could not load {spec!r} at start-up: {err}", flush=True)


def _preload(spec: str) -> None:
    """Load the default model while the server starts, so the first visitor does not wait for it."""
    try:
        explorer.decode(spec, "Hi", method="ar", max_new_tokens=1)
    except explorer.ExplorerError as err:
        print(f"note: could not preload {spec!r}: {err}", flush=True)


if __name__ == "__main__":
    preload = os.environ.get("EXPLORER_PRELOAD", "default")
    if preload and zerogpu.ON_ZERO_GPU:
        _load_for_zero_gpu(preload)
    elif preload:
        threading.Thread(target=_preload, args=(preload,), daemon=True).start()
    demo.launch(**launch_options())
