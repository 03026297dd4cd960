"""The disk the page fills, bounded in total bytes: Gradio's upload folder (every upload, and Gradio's copy of
each file the page offers for download) and the explorer's own trace files.

Gradio bounds each upload (``max_file_size``) and deletes its files after ``delete_cache`` (an hour), but
not their total: eight 32 MB uploads in 4 s stayed for about two hours (issue 28). A daemon thread trims
every ``EVERY_S`` seconds: files older than ``MAX_AGE_S`` go, then the oldest until the folders hold at
most ``MAX_UPLOAD_BYTES`` together. When a page closes, Gradio's copies of its trace files go with it
(``forget_copies``), so a closed session's download link stops answering.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from gradio.utils import get_upload_folder

from explorer.limits import MAX_UPLOAD_BYTES

log = logging.getLogger(__name__)

EVERY_S = 5.0
MAX_AGE_S = 3600.0


def gradio_folder() -> Path:
    return Path(get_upload_folder())


def trim(folders: list[Path], budget: int = MAX_UPLOAD_BYTES, max_age: float = MAX_AGE_S,
         now: float | None = None) -> int:
    """Delete files older than ``max_age`` seconds, then the oldest until ``folders`` hold at most
    ``budget`` bytes; empty folders left behind go too. Returns the bytes held afterwards."""
    now = time.time() if now is None else now
    files = []
    for folder in folders:
        files.extend(_files(folder))
    files.sort()
    held = sum(size for _, size, _ in files)
    for mtime, size, path in files:
        if now - mtime <= max_age and held <= budget:
            break
        try:
            path.unlink()
            held -= size
            _remove_empty(path.parent, folders)
        except OSError:
            continue
    return held


def _files(folder: Path) -> list[tuple[float, int, Path]]:
    """(modified, bytes, path) of every plain file under ``folder``; links are not followed. ``os.scandir`` reads an
    entry's type with the folder and stats it once: ``Path.rglob`` with ``is_file``, ``is_symlink`` and ``stat`` made
    four calls a file, and the trim of two workers' folders cost 25 s of CPU in one run of the suite."""
    found, folders = [], [folder]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            folders.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            stat = entry.stat(follow_symlinks=False)
                            found.append((stat.st_mtime, stat.st_size, Path(entry.path)))
                    except OSError:  # gone meanwhile
                        continue
        except OSError:  # not a folder, or gone meanwhile
            continue
    return found


def _remove_empty(folder: Path, roots: list[Path]) -> None:
    if folder in roots:
        return
    try:
        folder.rmdir()  # only if empty
    except OSError:
        pass


def forget_copies(names: list[str]) -> None:
    """Gradio's copies (``<upload folder>/<hash>/<name>``) of the files the page offered under ``names``."""
    root = gradio_folder()
    for name in names:
        for path in root.glob(f"*/{name}"):
            try:
                path.unlink()
                _remove_empty(path.parent, [root])
            except OSError:
                continue


_started = threading.Event()


def start_trimming(extra: list[Path]) -> None:
    """Trim Gradio's folder and ``extra`` every ``EVERY_S`` seconds, in one daemon thread per process."""
    if _started.is_set():
        return
    _started.set()

    def loop():
        while True:
            try:
                trim([gradio_folder(), *extra])
            except Exception:  # never let a failed trim end the loop
                log.exception("trimming the upload folders failed")
            time.sleep(EVERY_S)

    threading.Thread(target=loop, name="explorer-disk-trim", daemon=True).start()
