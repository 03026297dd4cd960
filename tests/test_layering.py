"""The package's layers, enforced on the source (no model is loaded):

    leaves      errors, limits, machine, pace, theory, untrusted, words: import nothing of the project but each other
    trace       the data model (a package): the leaves and itself only
    engine      the decoding algorithms: leaves, the trace and itself only (no methods, API, artifacts, UI or
                plots), and no method's name in its code
    below       engine, trace, models, drafts.py, run.py: nothing here imports a method (methods register
                their draft kinds and trainers themselves)
    methods     one module per method: the engine and the layers below, never the UI or the plots
    viz         figures and HTML from traces: no torch, no transformers, no gradio (test_viz.py too)
    tools       operator tools (the soak tests): imported by the CLI alone, never by the app or the runtime;
                nothing in the package imports the root ``app.py`` (the served app is ``ui.serving_demo()``)
    tests       no test file imports another (shared fixtures: conftest.py; helpers: helpers.py, conftest_ui.py)

Imports under ``if TYPE_CHECKING:`` are annotations, not dependencies, and are not counted."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "explorer"
LEAVES = {"errors", "limits", "machine", "pace", "theory", "untrusted", "words"}
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


@pytest.mark.parametrize("path", modules("trace"), ids=lambda p: p.name)
def test_the_trace_imports_only_itself_and_the_leaves(path):
    allowed = {"explorer.trace"} | {f"explorer.{leaf}" for leaf in LEAVES}
    bad = {n for n in project_imports(path) if within(n, {"explorer"}) and not within(n, allowed)}
    assert not bad, f"trace/{path.name} imports {sorted(bad)}"


BELOW_METHODS = modules("engine") + modules("trace") + modules("models") + [PACKAGE / "drafts.py", PACKAGE / "run.py"]


@pytest.mark.parametrize("path", BELOW_METHODS, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_nothing_below_the_methods_imports_one(path):
    bad = {n for n in project_imports(path) if within(n, {"explorer.methods", "explorer.api"})}
    assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"


def method_names_in_code(path: Path, names: set[str]) -> set[str]:
    """Method names written as string literals in a module's code (docstrings, which cite the papers, aside):
    what ``if method == "bild"`` or a hand-kept list of methods would need."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    words = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words |= set(re.findall(r"[a-z][a-z0-9_-]*", node.value))
    return words & names


@pytest.mark.parametrize("path", modules("engine") + [PACKAGE / "drafts.py", PACKAGE / "run.py"],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_engine_names_no_method(path):
    import explorer

    named = method_names_in_code(path, set(explorer.METHODS) - {"ar", "speculative"})  # the round loop's own two
    assert not named, f"{path.relative_to(PACKAGE)} names the methods {sorted(named)}"


def test_the_name_check_sees_a_method(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('"""BiLD and bita in a docstring are fine."""\nif method == "bild":\n    pass\n')
    assert method_names_in_code(module, {"bild", "bita"}) == {"bild"}


@pytest.mark.parametrize("path", modules("engine"), ids=lambda p: p.name)
def test_the_engine_imports_only_itself_and_the_leaves(path):
    allowed = {"explorer.engine", "explorer.trace"} | {f"explorer.{leaf}" for leaf in LEAVES}
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


# -- the tests themselves: no test file imports another ----------------------------------------------------
# Fixtures shared by several files are in conftest.py, plain helpers in helpers.py and conftest_ui.py (the
# page's): a test file imported by another runs its module-level code (skips, fixtures) a second time there.

TESTS = Path(__file__).resolve().parent


def imported_test_modules(source: str) -> set[str]:
    """The ``test_*`` modules a source imports anywhere (inside functions too), as ``test_x`` or ``tests.test_x``."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
            names |= {f"{node.module or ''}.{a.name}" for a in node.names if node.module in (None, "tests")}
    return {n for n in names if any(part.startswith("test_") for part in n.split("."))}


def test_no_test_file_imports_another():
    bad = {p.name: sorted(found) for p in sorted(TESTS.glob("test_*.py"))
           if (found := imported_test_modules(p.read_text(encoding="utf-8")))}
    assert not bad, f"test files import other test files (move what they share to conftest.py or helpers.py): {bad}"


def test_the_test_import_rule_catches_a_violation():
    for source in ("from test_viz import load", "import test_browser", "def f():\n    from test_lossless import PREFIX",
                   "from tests import test_viz", "import tests.test_viz as v"):
        assert imported_test_modules(source), source
    assert not imported_test_modules("import pytest\nfrom helpers import load\nfrom conftest_ui import set_number\n"
                                     "from explorer.viz import views")
