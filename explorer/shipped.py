"""Where the files that ship with the explorer are: ``assets/`` (the prompts, the trained drafts, the target's own
answers, the benchmarks the Compare tab offers).

In a checkout (and an editable install, ``pip install -e .``) they are the repository's ``assets/`` beside the
package; ``pip install .`` copies them into the installed package as ``explorer/assets/`` (``setup.py``), so an
installed copy runs from any folder. ``$EXPLORER_ASSETS`` points elsewhere (a folder of the same layout).

A leaf: imports nothing of the project, and nothing heavy.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
MARKER = "prompts.json"  # a folder holding this is an assets folder (the smallest file every part of it needs)


def assets_dir() -> Path:
    """The shipped assets: ``$EXPLORER_ASSETS`` when set, else the installed package's own copy, else the
    checkout's ``assets/`` (returned even when missing, so the file that is not there is named in the error)."""
    chosen = os.environ.get("EXPLORER_ASSETS")
    if chosen:
        return Path(chosen).expanduser().resolve()
    installed, checkout = PACKAGE / "assets", PACKAGE.parent / "assets"
    return installed if (installed / MARKER).is_file() else checkout


ASSETS = assets_dir()
