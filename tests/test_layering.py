"""The package's layers, enforced on the source (no model is loaded):

    leaves      errors, limits, theory, untrusted: import nothing of the project but each other
    engine      the decoding algorithms: leaves and itself only (no methods, API, artifacts, UI or plots)
    methods     one module per method: the engine and the layers below, never the UI or the plots
    viz         figures and HTML from traces: no torch, no transformers, no gradio (test_viz.py too)
    tools       operator tools (the soak tests): imported by the CLI alone, never by the app or the runtime;
                nothing in the package imports the root ``app.py`` (the served app is ``ui.serving_demo()``)

Imports under ``if TYPE_CHECKING:`` are annotations, not dependencies, and are not counted."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "explorer"
LEAVES = {"errors", "limits", "theory", "untrusted"}
UI_AND_PLOTS = {"gradio", "plotly", "explorer.ui", "explorer.viz"}


def project_imports(path: Path) -> set[str]:
    """Absolute names of what a module imports (relative imports resolved), TYPE_CHECKING blocks skipped."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
               for child in node.body for n in ast.walk(child)}
    names = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            if node.module:  # `from .. import theory` imports explorer.theory, not all of explorer
                names.add(module)
            names |= {f"{module}.{a.name}" for a in node.names}  # `from explorer import viz` imports a module
    return names


def modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py")) if folder else [PACKAGE / f"{leaf}.py" for leaf in sorted(LEAVES)]


def within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("path", modules(""), ids=lambda p: p.name)
def test_leaves_import_only_leaves(path):
    mine = {n for n in project_imports(path) if within(n, {"explorer"})}
    assert all(within(n, {f"explorer.{leaf}" for leaf in LEAVES}) for n in mine), (path.name, mine)


@pytest.mark.parametrize("path", modules("engine"), ids=lambda p: p.name)
def test_the_engine_imports_only_itself_and_the_leaves(path):
    allowed = {"explorer.engine"} | {f"explorer.{leaf}" for leaf in LEAVES}
    bad = {n for n in project_imports(path) if (within(n, {"explorer"}) and not within(n, allowed))
           or within(n, UI_AND_PLOTS)}
    assert not bad, f"engine/{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize("path", modules("methods"), ids=lambda p: p.name)
def test_methods_import_neither_the_ui_nor_the_plots(path):
    bad = {n for n in project_imports(path) if within(n, UI_AND_PLOTS | {"explorer.api"})}
    assert not bad, f"methods/{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize("path", modules("viz"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_viz_imports_no_model_code(path):
    bad = {n for n in project_imports(path) if within(n, {"torch", "transformers", "gradio", "explorer.engine.forward",
                                                          "explorer.engine.fast", "explorer.models"})}
    assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"


def test_only_the_cli_imports_the_operator_tools_and_nothing_imports_app_py():
    outside = [PACKAGE.parent / "app.py"] + [p for p in sorted(PACKAGE.rglob("*.py"))
                                             if p.relative_to(PACKAGE).parts[0] not in {"cli", "tools"}]
    bad = {str(p.relative_to(PACKAGE.parent)) for p in outside
           if any(within(n, {"explorer.tools"}) for n in project_imports(p))}
    assert not bad, f"{sorted(bad)} import explorer.tools"
    assert any(within(n, {"explorer.tools"}) for n in project_imports(PACKAGE / "cli" / "soak.py"))  # the rule sees
    bad = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "app" in project_imports(p)}
    assert not bad, f"{sorted(bad)} import the root app.py"


def test_the_rule_catches_a_violation(tmp_path, monkeypatch):
    """The checker itself: a forbidden import, relative or absolute, is seen; a TYPE_CHECKING one is not."""
    engine = tmp_path / "explorer" / "engine"
    engine.mkdir(parents=True)
    bad = engine / "bad.py"
    bad.write_text("from typing import TYPE_CHECKING\nfrom ..exits import exit_for\nimport plotly\n"
                   "if TYPE_CHECKING:\n    from ..ui import page\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path / "explorer")
    found = project_imports(bad)
    assert "explorer.exits" in found and "plotly" in found and "explorer.ui" not in found
