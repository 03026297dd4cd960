"""Loading without noise: ``quiet_transformers()`` keeps ``transformers``' progress bars and warnings out of
the CLI's and the app's output (around every load, and around the benchmark's ``generate``)."""

from __future__ import annotations

import contextlib


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
