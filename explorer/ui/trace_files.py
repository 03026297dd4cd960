"""The trace files the page offers for download: one folder per session under the temporary directory,
one file per run (replaced by the next), removed when the page closes or after ``MAX_AGE_S``, and
Gradio's copies of them with it."""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import time
from pathlib import Path

from . import disk

TRACE_DIR = Path(tempfile.gettempdir()) / "spec-explorer-traces"
MAX_AGE_S = disk.MAX_AGE_S  # a session that never said goodbye (a killed tab) loses its file after this


def trace_folder(session: str) -> Path:
    return TRACE_DIR / re.sub(r"[^A-Za-z0-9_-]", "_", session)[:64]


def offered_name(stem: str, session: str) -> str:
    """A file name for the page to offer: ``stem``, the time to the second and a token of the session, made safe.
    The token keeps two sessions' names apart: Gradio's copies are forgotten by name when a page closes
    (``forget_files``), and two visitors' races in the same second were both named ``race-<time>.json``, so one
    closing their page broke the other's download link."""
    token = hashlib.sha1(session.encode("utf-8", "replace")).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{token}") + ".json"


def race_folder(session: str) -> Path:
    """Where a session's race report is written (``ui/race``)."""
    return TRACE_DIR / (trace_folder(session).name + "-race")


def forget_files(session: str) -> None:
    """A closed page's trace file and race report, and Gradio's copies of them."""
    offered = [path.name for folder in (trace_folder(session), race_folder(session)) if folder.is_dir()
               for path in folder.iterdir()]
    disk.forget_copies(offered)  # Gradio's own copies, which its download links serve
    shutil.rmtree(trace_folder(session), ignore_errors=True)
    shutil.rmtree(race_folder(session), ignore_errors=True)


def _clean_stale_trace_files(now: float) -> None:
    """Folders of sessions that left without an unload event, once older than ``MAX_AGE_S``."""
    for folder in TRACE_DIR.glob("*"):
        try:
            if now - folder.stat().st_mtime > MAX_AGE_S:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:  # removed by another thread meanwhile
            pass


def write_trace_file(trace, session: str) -> Path:
    """The trace as a JSON file for the download button (one file per session, replaced by the next;
    removed when the page closes, or after an hour)."""
    _clean_stale_trace_files(time.time())
    folder = trace_folder(session)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    # a draft's name may be 1000 characters; a file name may not pass 255 bytes
    draft = re.sub(r"[^A-Za-z0-9_.-]", "_", trace.draft or "none")[:60]
    path = folder / offered_name(f"trace-{trace.method[:40]}-{draft}", session)
    path.write_text(trace.to_json(), encoding="utf-8")
    return path
