"""The Speculative Decoding Explorer in the browser: ``python app.py`` (what Hugging Face Spaces runs).

Serves on ``GRADIO_SERVER_NAME`` / ``GRADIO_SERVER_PORT`` when they are set (Gradio reads them).
Everything works offline: no analytics, no Hub calls unless a model asks for one.
"""

import os

for _name, _value in {"GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1",
                      "HF_HUB_DISABLE_TELEMETRY": "1"}.items():
    os.environ.setdefault(_name, _value)

import threading  # noqa: E402  (the environment above must be set before gradio / huggingface_hub load)

import explorer  # noqa: E402
from explorer.ui import build_demo, launch_options  # noqa: E402

demo = build_demo()
demo.queue(default_concurrency_limit=4, max_size=64)


def _preload(spec: str) -> None:
    """Load the default model while the server starts, so the first visitor does not wait for it."""
    try:
        explorer.decode(spec, "Hi", method="ar", max_new_tokens=1)
    except explorer.ExplorerError as err:
        print(f"note: could not preload {spec!r}: {err}", flush=True)


if __name__ == "__main__":
    preload = os.environ.get("EXPLORER_PRELOAD", "default")
    if preload:
        threading.Thread(target=_preload, args=(preload,), daemon=True).start()
    demo.launch(**launch_options())
