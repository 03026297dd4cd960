"""The README tells a newcomer the truth (#42 item 11): which address to open after ``python app.py`` (it never
said), and commands whose files exist (its What-if example read ``metrics.txt``, which does not). It is a front
page (#43): at most 10 KB, its methods table the registry's, CI's test command its own; what left it lives in
docs/, whose commands and links are held to the same truth."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = {path: path.read_text(encoding="utf-8")
         for path in (ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").glob("*.md")))}


def test_python_app_py_serves_the_address_the_readme_names():
    env = {**os.environ, "EXPLORER_PRELOAD": "", "PYTHONUNBUFFERED": "1"}
    env.pop("GRADIO_SERVER_PORT", None)
    env.pop("GRADIO_SERVER_NAME", None)
    app = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    served = None
    try:
        deadline = time.time() + 240
        while served is None and time.time() < deadline and app.poll() is None:
            line = app.stdout.readline()
            found = re.search(r"Running on local URL:\s+(http://\S+)", line)
            served = found.group(1).rstrip("/") if found else None
    finally:
        app.kill()
        app.wait()
    assert served and re.fullmatch(r"http://127\.0\.0\.1:(\d+)", served), served
    assert "http://127.0.0.1:7860" in README  # Gradio's first choice; a taken port moves it on, and the line says so
    port = int(served.rsplit(":", 1)[1])
    assert 7860 <= port < 7960 and "Running on local URL" in README


def test_every_file_a_command_in_the_readme_or_the_docs_reads_exists():
    commands = [c for text in PAGES.values() for c in re.findall(r"python -m explorer [^`\n]*", text)]
    assert any("whatif" in c for c in commands)
    for command in commands:
        for flag, value in re.findall(r"(--(?:metrics|trace|report|out-of|input))\s+(\S+)", command):
            if re.fullmatch(r"[A-Z]+\d*", value):  # a placeholder of a synopsis: --metrics FILE
                continue
            assert (ROOT / value).is_file(), f"{command}: {flag} {value} does not exist"


def test_the_whatif_example_prints_what_its_doc_says():
    whatif = PAGES[ROOT / "docs" / "whatif.md"]
    command = re.search(r"^\$ (python -m explorer whatif --metrics assets/\S+[^\n]*)", whatif, re.M).group(1)
    out = subprocess.run([sys.executable, *shlex.split(command)[1:]], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Set num_speculative_tokens to 3" in out.stdout  # what the worked example quotes of it
    assert "Set num_speculative_tokens to 3" in whatif


def test_the_readme_methods_table_is_the_one_the_registry_writes():
    from explorer.methods.table import BEGIN, END

    out = subprocess.run([sys.executable, "-m", "explorer.methods.table"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert README.count(BEGIN) == 1 and README.count(END) == 1
    copy = README[README.index(BEGIN):README.index(END) + len(END)]
    assert copy == out.stdout.strip(), "a method changed: run `python -m explorer.methods.table` into the README"


def test_the_readme_is_a_front_page_with_cis_test_command():
    assert len(README.encode("utf-8")) <= 10_000  # what leaves it goes to docs/
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = next(line for line in ci.splitlines() if line.startswith("pip install"))
    assert command in README
    assert 'python -m pytest -q -m "not slow and not browser and not model and not network"' in README


def test_every_relative_link_and_image_resolves():
    for path, text in PAGES.items():
        for link, src in re.findall(r"\]\(([^)\s]+)\)|src=\"([^\"]+)\"", text):
            target = (link or src).split("#")[0]
            if target and not re.match(r"[a-z]+:", target):
                assert (path.parent / target).exists(), f"{path.relative_to(ROOT)}: {link or src} does not resolve"
