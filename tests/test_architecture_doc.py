"""docs/architecture.md is a map a newcomer trusts (#50): every module path it names exists, and every module
under explorer/ is named in it, so a module that moves or appears without its line fails here, naming the lines
to fix. The README's file map is held to the first half of the same truth.

How a name is read: in the file tree (the code block that opens with ``explorer/``) an entry at the start of a
line (``  engine/``, ``    bild/``, ``  api.py``) sets the room its line and its continuation lines speak of, so a
bare ``rounds.py`` under ``  engine/`` is ``explorer/engine/rounds.py``; a path with a slash is read from the
room, from ``explorer/`` or from the checkout's root, whichever holds it. In the prose around the tree a name is
read from ``explorer/`` or from the root. A package is named by its folder (``beam/``): that names its
``__init__.py``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "explorer"
DOC = ROOT / "docs" / "architecture.md"
DESCRIPTION_COLUMN = 21  # where the tree's descriptions start: an entry stands left of it
NAME = re.compile(r"(?<![\w./-])((?:[A-Za-z_][\w]*/)*[A-Za-z_][\w]*(?:\.py|/))(?![\w/])")


def _tree_and_prose(text: str) -> tuple[list[str], list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "```" and lines[i + 1] == "explorer/")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "```")
    return lines[start + 2:end], lines[:start] + lines[end + 1:]


def _exists(path: Path) -> bool:
    return path.is_file() if path.suffix == ".py" else path.is_dir()


def _resolve(name: str, rooms: list[Path]) -> Path | None:
    for room in rooms:
        path = room / name.rstrip("/")
        if _exists(path):
            return path
    return None


def named_paths(text: str) -> tuple[set[Path], list[str]]:
    """The paths the doc names, and each name that resolves to nothing (with its line)."""
    tree, prose = _tree_and_prose(text)
    found: set[Path] = set()
    missing: list[str] = []
    top = room = PACKAGE
    first = ""
    for line in tree:
        entry = re.match(r"( *)(\S+)", line)
        indent = len(entry.group(1)) if entry else DESCRIPTION_COLUMN
        if indent < DESCRIPTION_COLUMN:
            first = entry.group(2)
            if indent == 0:
                room = ROOT / first.rsplit("/", 1)[0] if "/" in first else ROOT
            elif first.endswith("/"):
                room = (PACKAGE if indent <= 2 else top) / first.rstrip("/")
                top = room if indent <= 2 else top
            else:
                room = PACKAGE if indent <= 2 else top
                top = PACKAGE if indent <= 2 else top
            if first.endswith("/"):
                if not room.is_dir():
                    missing.append(f"{first} (tree: {line.strip()[:60]})")
                found.add(room)
        for name in NAME.findall(line):
            if name == first and first.endswith("/"):
                continue
            rooms = [room, ROOT] if "/" not in name.rstrip("/") else [room, PACKAGE, ROOT]
            path = _resolve(name, rooms)
            if path is None:
                missing.append(f"{name} (read in {room.relative_to(ROOT) or '.'}: {line.strip()[:60]})")
            else:
                found.add(path)
    for line in prose:
        for name in re.findall(r"`([^`\s]+(?:\.py|/))`", line) + re.findall(r"\((\S+\.py)[,)]", line):
            path = _resolve(name, [PACKAGE, ROOT])
            if path is None:
                missing.append(f"{name} (prose: {line.strip()[:60]})")
            else:
                found.add(path)
    return found, missing


def every_module() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def unnamed_modules(text: str) -> list[str]:
    found, _ = named_paths(text)
    return [str(p.relative_to(ROOT)) for p in every_module()
            if p not in found and not (p.name == "__init__.py" and p.parent in found)]


def test_every_module_the_architecture_names_exists():
    _, missing = named_paths(DOC.read_text(encoding="utf-8"))
    assert not missing, "docs/architecture.md names what is not there:\n  " + "\n  ".join(missing)


def test_every_module_under_explorer_is_named_in_the_architecture():
    unnamed = unnamed_modules(DOC.read_text(encoding="utf-8"))
    assert not unnamed, "docs/architecture.md does not name:\n  " + "\n  ".join(unnamed)


def test_the_check_catches_a_module_that_moved_and_one_that_is_new():
    text = DOC.read_text(encoding="utf-8")
    assert "    rounds.py " in text and "    speculative.py " in text
    moved = text.replace("    rounds.py ", "    round_loop.py ", 1)  # a line left behind by a move
    _, missing = named_paths(moved)
    assert any(m.startswith("round_loop.py") for m in missing)
    assert "explorer/engine/rounds.py" in unnamed_modules(moved)  # and the module it moved to is unnamed


def test_the_readme_file_map_names_what_is_there():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- file map -->\n(.*?)<!-- /file map -->", readme, re.S)
    assert block, "the README's file map (between <!-- file map --> and <!-- /file map -->) is missing"
    rows = [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("```")]
    assert 1 <= len(rows) <= 10, len(rows)
    paths = [name for name in re.findall(r"`([^`\s]+)`", block.group(1)) if "/" in name or name.endswith(".py")]
    for name in paths:
        assert (ROOT / name.rstrip("/")).exists(), f"the README's file map names {name}, which is not there"
    rooms = {"app.py", "explorer/engine/", "explorer/methods/", "explorer/ui/", "explorer/viz/", "explorer/trace/",
             "explorer/whatif/", "explorer/tools/", "tests/", "assets/"}
    assert rooms <= set(paths), f"the README's file map leaves out {sorted(rooms - set(paths))}"
