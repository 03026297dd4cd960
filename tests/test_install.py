"""The explorer as an installed package (#48): `pip install .` puts the package `explorer`, its shipped assets and the
command `spec-explorer` into an environment, and the README's Python example then runs from a folder outside the
repository (it failed with ModuleNotFoundError: there was no pyproject.toml); `pip install -e .` finds the checkout's
own assets.

Installed offline, as CI can: a venv that sees this machine's packages (``--system-site-packages``: torch and the
rest are not downloaded again) and ``pip install --no-deps --no-build-isolation`` (setuptools, already here, builds
it; nothing is fetched), from a copy of the files a build reads, so the checkout gets no build/ or egg-info folder.
Building and installing take ≈ 10 s here; each check runs in a fresh process outside the repository, with no
PYTHONPATH, so only the installed copy can answer."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD_FILES = ("pyproject.toml", "setup.py", "README.md", "requirements.txt", "explorer", "assets")

pytestmark = pytest.mark.slow


def install(base: Path, editable: bool) -> tuple[Path, Path, Path]:
    """(the venv's python, the source it was installed from, an empty folder outside both)."""
    source = base / "source"
    for name in BUILD_FILES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(path, source / name)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    # pip from the system's site-packages installs into the venv (the venv's own bundled setuptools would be old)
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           *(["-e"] if editable else []), str(source)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    away = base / "elsewhere"
    away.mkdir()
    return python, source, away


def outside(command: list[str], away: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """A command run in ``away``, with no PYTHONPATH: only what is installed can be imported."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EXPLORER_ASSETS")}
    return subprocess.run(command, cwd=away, env=env, capture_output=True, text=True, timeout=timeout)


WHERE = ("import json, explorer, explorer.shipped as s; from explorer.bench import load_prompts; "
         "print(json.dumps({'package': explorer.__file__, 'assets': str(s.ASSETS), 'prompts': len(load_prompts()), "
         "'exits': len(list((s.ASSETS / 'early-exit').glob('*.safetensors'))), "
         "'benchmarks': len(list(s.ASSETS.glob('bench-*.json')))}))")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    return install(tmp_path_factory.mktemp("installed"), editable=False)


def test_an_installed_copy_imports_from_anywhere_with_its_assets_and_its_command(installed):
    python, source, away = installed
    out = outside([str(python), "-c", WHERE], away)
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout)
    venv = python.parent.parent
    assert Path(found["package"]).is_relative_to(venv) and Path(found["assets"]) == Path(found["package"]).parent / "assets"
    shipped = ROOT / "assets"
    assert found["prompts"] == len(json.loads((shipped / "prompts.json").read_text())["prompts"])
    assert found["exits"] == len(list((shipped / "early-exit").glob("*.safetensors"))) > 0
    assert found["benchmarks"] == len(list(shipped.glob("bench-*.json")))
    assert not (Path(found["assets"]) / "screens").exists()  # the docs' screenshots stay out of the package
    kernel = Path(found["package"]).parent / "engine" / "q4_vnni.cpp"  # built where it runs (engine/q4_vnni.py)
    assert kernel.read_bytes() == (ROOT / "explorer" / "engine" / "q4_vnni.cpp").read_bytes()
    command = venv / "bin" / "spec-explorer"
    helped = outside([str(command), "--help"], away)
    assert helped.returncode == 0 and "run" in helped.stdout and "bench" in helped.stdout, helped.stderr[-2000:]
    # a command that reads a shipped file, found through the installed copy: What if on the shipped benchmark
    metrics = Path(found["assets"]) / "bench-latest.json"
    advised = outside([str(command), "whatif", "--metrics", str(metrics)], away)
    assert advised.returncode == 0 and "γ" in advised.stdout, advised.stderr[-2000:]


def test_an_editable_install_reads_the_checkouts_own_assets(tmp_path):
    python, source, away = install(tmp_path, editable=True)
    out = outside([str(python), "-c", WHERE], away)
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout)
    assert Path(found["package"]) == source / "explorer" / "__init__.py" and Path(found["assets"]) == source / "assets"


@pytest.mark.model
def test_the_readmes_python_example_runs_outside_the_repository(installed):
    python, _, away = installed
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    assert "import explorer" in example and "explorer.decode(" in example
    (away / "example.py").write_text(example, encoding="utf-8")
    out = outside([str(python), "example.py"], away, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    # print(text, tokens/s, acceptance): the text (one line or several), then the two numbers
    text, tokens_per_s, acceptance = out.stdout.rstrip("\n").rsplit(" ", 2)
    assert text.strip() and float(tokens_per_s) > 0 and 0 <= float(acceptance) <= 1
