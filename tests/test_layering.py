"""The package's layers, enforced on the source (no model is loaded):

    leaves      chi_square, errors, gc_pause, limits, machine, notices, pace, ratios, shipped, theory, untrusted, words: import
                nothing of the project but each other, and no torch, transformers or gradio at import
    trace       the data model (a package): the leaves and itself only (so no torch either)
    engine      the decoding algorithms: leaves, the trace and itself only (no methods, API, artifacts, UI or
                plots), and no method's name in its code
    below       engine, trace, models, drafts.py, run.py: nothing here imports a method (methods register
                their draft kinds and trainers themselves)
    methods     one module per method: the engine and the layers below, never the UI or the plots
    viz         figures and HTML from traces: no torch, no transformers, no gradio, no model code (test_viz.py too)
    whatif      the what-if (a package): no torch, transformers or gradio at import; its maths and the parsers of
                the engines' files (``model``, ``counts``, ``parsers``) need nothing but the leaves and each other,
                not even in a function (``runs``, the bridge to our own runs, and ``sources`` reach the API)
    tools       operator tools (the soak tests): imported by the CLI alone, never by the app or the runtime;
                nothing in the package imports the root ``app.py`` (the served app is ``ui.serving_demo()``)
    circles     no two modules import each other, directly or round a circle
    tests       no test file imports another (shared fixtures: conftest.py; helpers: helpers.py, conftest_ui.py)

Imports under ``if TYPE_CHECKING:`` are annotations, not dependencies, and are not counted.

A rule counts a module's own imports wherever they stand, inside functions too (bar the leaves' and the
trace's rule on heavy libraries, which is about import), and follows them through the modules of the package,
transitively, in one of two ways:

- what a layer depends on (which project modules: the leaves, trace, engine, below-the-methods, methods, whatif
  and tools rules, and the circles) follows every import, those inside functions too: a function's import is a
  dependency of the module as much as one at the top;
- what importing a module loads (the heavy libraries torch, transformers and gradio, and, for the viz, the model
  code: a view must replay a trace without them) follows only the imports that run at import: module level and
  class bodies, not inside a function. A function that imports torch where it needs it (``pace``'s probe,
  ``limits.gpu_present``) loads it only for its callers, and the leaves do so on purpose.

Importing ``explorer.a.b`` also runs the packages above it (``explorer/a/__init__.py``): what importing loads
follows them, but not the root ``explorer/__init__.py`` (the public API, which loads the engine and the models), or
every module would load everything; what a module depends on follows the modules it names only."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "explorer"
LEAVES = {"chi_square", "errors", "gc_pause", "limits", "machine", "notices", "pace", "ratios", "shipped", "theory",
          "untrusted", "words"}
UI_AND_PLOTS = {"gradio", "plotly", "explorer.ui", "explorer.viz"}


def import_nodes(path: Path, at_import: bool = False) -> list[tuple[ast.Import | ast.ImportFrom, str | None]]:
    """A module's import statements, each with the absolute module a ``from`` import names (relative imports
    resolved; None for ``import x``), TYPE_CHECKING blocks skipped; with ``at_import`` only those that run when
    the module is imported (module level and class bodies: an import inside a function runs when it is called)."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
               for child in node.body for n in ast.walk(child)}
    if at_import:
        skipped |= {id(n) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    for child in node.body for n in ast.walk(child)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.append((node, None))
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found.append((node, module))
    return found


def project_imports(path: Path) -> set[str]:
    """Absolute names of what a module imports (relative imports resolved), TYPE_CHECKING blocks skipped."""
    names = set()
    for node, module in import_nodes(path):
        if module is None:
            names |= {a.name for a in node.names}
            continue
        if node.module:  # `from .. import theory` imports explorer.theory, not all of explorer
            names.add(module)
        names |= {f"{module}.{a.name}" for a in node.names}  # `from explorer import viz` imports a module
    return names


def modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py")) if folder else [PACKAGE / f"{leaf}.py" for leaf in sorted(LEAVES)]


def within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


# -- the import graph: what a module reaches through the project modules it imports ---------------------------


def module_file(name: str) -> Path | None:
    """A module's file (a package's ``__init__.py``); None for a name that is no file."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return next((f for f in (path.with_suffix(".py"), path / "__init__.py") if f.is_file()), None)


def is_module(name: str) -> bool:
    """A module of the package: a file, a package, or a folder without ``__init__.py`` (``explorer.engine``)."""
    return within(name, {"explorer"}) and (module_file(name) is not None
                                           or PACKAGE.parent.joinpath(*name.split(".")).is_dir())


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def imported_modules(name: str, at_import: bool) -> frozenset[str]:
    """What a module (``app`` too) imports: the package's modules as the module meant (``from explorer import
    bench``: explorer.bench; ``from .style import GREY``: explorer.viz.style), other libraries by the name written."""
    path = module_file(name)
    if path is None:  # a folder without __init__.py runs nothing
        return frozenset()
    found = set()
    for node, module in import_nodes(path, at_import):
        if module is None:
            found |= {a.name for a in node.names}
        elif within(module, {"explorer"}):
            found |= {f"{module}.{a.name}" if is_module(f"{module}.{a.name}") else module for a in node.names}
        else:
            found.add(module)
    return frozenset(found)


def packages_above(name: str) -> set[str]:
    """The packages Python runs before a module of the package, the root ``explorer/__init__.py`` aside."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(2, len(parts))} if within(name, {"explorer"}) else set()


def reached(path: Path, prefixes, at_import: bool) -> list[str]:
    """Each module of ``prefixes`` that the module at ``path`` reaches, as the chain that reaches it ("a -> b ->
    torch"), through every module of the package it reaches: what it depends on (every import), or ``at_import``
    what importing it loads (the imports at module level, and the packages above each module but the root)."""
    start = module_name(path)
    via: dict[str, str] = {}
    todo = [start]
    while todo:
        current = todo.pop()
        for found in sorted(imported_modules(current, at_import) | (packages_above(current) if at_import else set())):
            if found not in via and found != start:
                via[found] = current
                if within(found, {"explorer"}):
                    todo.append(found)

    def chain(name: str) -> str:
        return name if name == start else f"{chain(via[name])} -> {name}"

    return [chain(n) for n in sorted(via) if within(n, prefixes)]


def outside(path: Path, allowed) -> list[str]:
    """The modules of the package outside ``allowed`` that a module reaches through every import."""
    return [c for c in reached(path, {"explorer"}, at_import=False) if not within(c.rsplit(" -> ", 1)[1], allowed)]


LEAF_MODULES = {f"explorer.{leaf}" for leaf in LEAVES}
HEAVY = {"torch", "transformers", "gradio"}


@pytest.mark.parametrize("path", modules(""), ids=lambda p: p.name)
def test_leaves_import_only_leaves(path):
    mine = {n for n in project_imports(path) if within(n, {"explorer"})}
    assert all(within(n, LEAF_MODULES) for n in mine), (path.name, mine)
    assert not outside(path, LEAF_MODULES)
    assert not reached(path, HEAVY, at_import=True), "a leaf imports torch only inside the function that needs it"


@pytest.mark.parametrize("path", modules("trace"), ids=lambda p: p.name)
def test_the_trace_imports_only_itself_and_the_leaves(path):
    allowed = {"explorer.trace"} | LEAF_MODULES
    bad = {n for n in project_imports(path) if within(n, {"explorer"}) and not within(n, allowed)}
    assert not bad, f"trace/{path.name} imports {sorted(bad)}"
    assert not (bad := outside(path, allowed) + reached(path, HEAVY, at_import=True)), bad


BELOW_METHODS = modules("engine") + modules("trace") + modules("models") + [PACKAGE / "drafts.py", PACKAGE / "run.py"]


@pytest.mark.parametrize("path", BELOW_METHODS, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_nothing_below_the_methods_imports_one(path):
    bad = {n for n in project_imports(path) if within(n, {"explorer.methods", "explorer.api"})}
    assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"
    assert not (bad := reached(path, {"explorer.methods", "explorer.api"}, at_import=False)), bad


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
    allowed = {"explorer.engine", "explorer.trace"} | LEAF_MODULES
    bad = {n for n in project_imports(path) if (within(n, {"explorer"}) and not within(n, allowed))
           or within(n, UI_AND_PLOTS)}
    assert not bad, f"engine/{path.name} imports {sorted(bad)}"
    assert not (bad := outside(path, allowed) + reached(path, UI_AND_PLOTS, at_import=False)), bad


@pytest.mark.parametrize("path", modules("methods"), ids=lambda p: p.name)
def test_methods_import_neither_the_ui_nor_the_plots(path):
    bad = {n for n in project_imports(path) if within(n, UI_AND_PLOTS | {"explorer.api"})}
    assert not bad, f"methods/{path.name} imports {sorted(bad)}"
    assert not (bad := reached(path, UI_AND_PLOTS | {"explorer.api"}, at_import=False)), bad


MODEL_CODE = HEAVY | {"explorer.engine.forward", "explorer.engine.fast", "explorer.models"}


@pytest.mark.parametrize("path", modules("viz"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_viz_imports_no_model_code(path):
    bad = {n for n in project_imports(path) if within(n, MODEL_CODE)}
    assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"
    assert not (bad := reached(path, MODEL_CODE, at_import=True)), bad


ENGINE_SIDE = {"explorer.engine", "explorer.api", "explorer.models", "explorer.methods", "explorer.audit",
               "explorer.drafts", "explorer.run"}


@pytest.mark.parametrize("path", modules("viz"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_viz_reaches_no_engine_even_in_a_function(path):
    """A figure replays a trace: no view reaches the engine, the models, the methods or the API, not even through a
    function's import (the audit's figure read its χ² bin rule from ``explorer.audit``, which runs the engine: the
    rule is the leaf ``chi_square`` now)."""
    assert not (bad := reached(path, ENGINE_SIDE, at_import=False)), bad


def test_only_the_cli_imports_the_operator_tools_and_nothing_imports_app_py():
    outside = [PACKAGE.parent / "app.py"] + [p for p in sorted(PACKAGE.rglob("*.py"))
                                             if p.relative_to(PACKAGE).parts[0] not in {"cli", "tools"}]
    bad = {str(p.relative_to(PACKAGE.parent)) for p in outside
           if any(within(n, {"explorer.tools"}) for n in project_imports(p))}
    assert not bad, f"{sorted(bad)} import explorer.tools"
    bad = [c for p in outside if p != PACKAGE / "__main__.py" for c in reached(p, {"explorer.tools"}, at_import=False)]
    assert not bad, bad
    assert any(within(n, {"explorer.tools"}) for n in project_imports(PACKAGE / "cli" / "soak.py"))  # the rule sees
    assert reached(PACKAGE / "__main__.py", {"explorer.tools"}, at_import=False)  # and follows the CLI to the tools
    bad = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "app" in project_imports(p)}
    assert not bad, f"{sorted(bad)} import the root app.py"


WHATIF_PURE = [PACKAGE / "whatif" / f"{name}.py" for name in ("model", "counts", "parsers")]


@pytest.mark.parametrize("path", modules("whatif"), ids=lambda p: p.name)
def test_whatif_loads_no_torch(path):
    assert not (bad := reached(path, HEAVY, at_import=True)), bad


@pytest.mark.parametrize("path", WHATIF_PURE, ids=lambda p: p.name)
def test_the_whatif_maths_and_parsers_need_nothing_but_the_leaves(path):
    allowed = LEAF_MODULES | {module_name(p) for p in WHATIF_PURE}
    assert not (bad := outside(path, allowed)), bad


def import_cycles() -> list[list[str]]:
    """The circles among the package's modules (Tarjan's strongly connected components of the graph of every
    import, those inside functions too; ``packages_above`` not counted: Python runs a package before its modules,
    and a module importing its own package's names is no circle unless the package imports it back)."""
    graph = {module_name(p): {n for n in imported_modules(module_name(p), False) if within(n, {"explorer"})}
             for p in sorted(PACKAGE.rglob("*.py"))}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for after in sorted(graph.get(node, ())):
            if after not in index:
                visit(after)
                low[node] = min(low[node], low[after])
            elif after in stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            component = stack[stack.index(node):]
            del stack[stack.index(node):]
            if len(component) > 1 or node in graph[node]:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return cycles


def test_no_import_cycles():
    assert not (cycles := import_cycles()), f"modules that import each other, directly or round a circle: {cycles}"


def test_the_rule_catches_a_violation(tmp_path, monkeypatch):
    """The checker itself: a forbidden import, relative or absolute, is seen; a TYPE_CHECKING one is not; a chain
    through another module is followed (at import: not through a function's import); a circle is found."""
    engine = tmp_path / "explorer" / "engine"
    engine.mkdir(parents=True)
    bad = engine / "bad.py"
    bad.write_text("from typing import TYPE_CHECKING\nfrom ..exits import exit_for\nimport plotly\n"
                   "if TYPE_CHECKING:\n    from ..ui import page\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path / "explorer")
    found = project_imports(bad)
    assert "explorer.exits" in found and "plotly" in found and "explorer.ui" not in found
    imported_modules.cache_clear()  # the cache holds the real package's graph: cleared before and after
    try:
        chain_and_circle(tmp_path / "explorer", bad)
    finally:
        imported_modules.cache_clear()


def chain_and_circle(package: Path, bad: Path) -> None:
    (package / "exits.py").write_text("from .engine import bad\n\n\ndef lazy():\n    import torch\n")
    (package / "viz").mkdir()
    (package / "viz" / "__init__.py").write_text("import torch\n")
    (package / "viz" / "view.py").write_text("from ..exits import lazy\n")
    assert reached(bad, {"plotly"}, at_import=True) == ["explorer.engine.bad -> plotly"]
    assert outside(bad, {"explorer.engine"}) == ["explorer.engine.bad -> explorer.exits"]
    view = package / "viz" / "view.py"
    assert reached(view, {"torch"}, at_import=True) == ["explorer.viz.view -> explorer.viz -> torch"]
    assert not reached(package / "exits.py", {"torch"}, at_import=True)
    assert reached(package / "exits.py", {"torch"}, at_import=False) == ["explorer.exits -> torch"]
    assert import_cycles() == [["explorer.engine.bad", "explorer.exits"]]


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


# -- a method is one package: nothing outside explorer/methods/ imports one ----------------------------------


def method_modules() -> set[str]:
    """The modules that hold a method (the package or module under ``explorer.methods`` its ``start`` is written
    in), read from the registry; the registry's own modules (options, records, the system grammar) are not one."""
    from explorer import methods

    found = {".".join(m.start.__module__.split(".")[:3]) for m in methods.discover().values()}
    assert found and all(within(n, {"explorer.methods"}) and n != "explorer.methods" for n in found), found
    return found


OUTSIDE_THE_METHODS = [PACKAGE.parent / "app.py"] + [p for p in sorted(PACKAGE.rglob("*.py"))
                                                     if p.relative_to(PACKAGE).parts[0] != "methods"]


def method_imports(path: Path, method_modules: set[str]) -> set[str]:
    """The method modules a module imports, anywhere in it (a function's import is a dependency too)."""
    return {n for n in project_imports(path) if within(n, method_modules)}


def test_no_module_outside_the_methods_imports_a_method():
    """Adding a method changes nothing else: per-session state, sweeps, baselines and draft kinds are reached through
    the registry (``explorer.methods``), never by naming a method's module."""
    mine = method_modules()
    bad = {str(p.relative_to(PACKAGE.parent)): sorted(found) for p in OUTSIDE_THE_METHODS
           if (found := method_imports(p, mine))}
    assert not bad, f"modules outside explorer/methods/ import a method's module: {bad}"


def test_the_method_import_rule_sees_one(tmp_path, monkeypatch):
    module = tmp_path / "explorer" / "ui" / "m.py"
    module.parent.mkdir(parents=True)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path / "explorer")
    for source in ("from explorer.methods.suffix.corpus import HISTORY", "def f():\n    from ..methods.bild import X",
                   "from ..methods import eesd", "import explorer.methods.beam.search"):
        module.write_text(source + "\n")
        assert method_imports(module, {"explorer.methods.suffix", "explorer.methods.bild",
                                                 "explorer.methods.eesd", "explorer.methods.beam"}), source
    module.write_text("from explorer import methods\nfrom ..methods import discover, Request\n")
    assert not method_imports(module, {"explorer.methods.suffix"})


# -- a method's sweep is its own: declared by its record, run by the one runner, named by no shared module ----------


def method_sweep_names() -> set[str]:
    """The names a method's sweep function takes when it is written for one method (``bild_sweep``,
    ``lenience_markdown``): ``<method or sweep>_sweep`` and ``<method or sweep>_markdown``, for every method and
    every sweep the records declare."""
    from explorer import methods

    stems = {m.name.replace("-", "_") for m in methods.discover().values()} | {
        sweep.name for m in methods.discover().values() for sweep in getattr(m, "sweeps", ())}
    return {f"{stem}_{job}" for stem in stems for job in ("sweep", "markdown")}


def named_identifiers(path: Path) -> set[str]:
    """Every identifier a module defines, reads, imports or reads as an attribute (``sweep.bild_sweep``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found |= {node.name.rsplit(".", 1)[-1], node.asname or ""}
    return found - {""}


def test_every_method_sweep_is_declared_by_its_method():
    """BiLD's, lenience's and beam search's sweeps are records of their methods (``Method.sweeps``), each function
    written in the method's own package (the runner, ``explorer.sweep.run``, is shared and names none)."""
    from explorer import methods

    sweeps = methods.sweeps()
    assert {"bild", "lenience", "beam"} <= set(sweeps), sorted(sweeps)
    for name, (method, sweep) in sweeps.items():
        home = ".".join(method.start.__module__.split(".")[:3])
        for job in ("grid", "options", "row", "words", "table"):
            assert within(getattr(sweep, job).__module__, {home}), (name, job, getattr(sweep, job).__module__)


def test_no_shared_module_names_a_method_sweep_function():
    """The CLI, the page and the study tools reach a method's sweep through the registry (``methods.sweeps()``,
    ``sweep.run(name, ...)``), never by a function written for one method."""
    names = method_sweep_names()
    bad = {str(p.relative_to(PACKAGE.parent)): sorted(found) for p in OUTSIDE_THE_METHODS
           if (found := named_identifiers(p) & names)}
    assert not bad, f"shared modules name a method's sweep function: {bad}"


def test_the_sweep_name_rule_sees_one(tmp_path):
    module = tmp_path / "m.py"
    names = method_sweep_names()
    for source in ("from explorer.sweep import bild_sweep", "report = sweep.lenience_sweep('default')",
                   "def beam_markdown(report):\n    pass", "from explorer import beam_sweep"):
        module.write_text(source + "\n")
        assert named_identifiers(module) & names, source
    module.write_text("report = sweep.run('bild', 'default')\ntable = sweep.table('bild', report)\n"
                      "def bild_sweep_section():\n    pass\n")
    assert not named_identifiers(module) & names
