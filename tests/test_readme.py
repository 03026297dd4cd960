"""The README tells a newcomer the truth (#42 item 11): which address to open after ``python app.py`` (it never
said), and commands whose files exist (its What-if example read ``metrics.txt``, which does not)."""

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


def test_every_file_a_readme_command_reads_exists():
    commands = re.findall(r"python -m explorer [^`\n]*", README)
    assert any("whatif" in c for c in commands)
    for command in commands:
        for flag, value in re.findall(r"(--(?:metrics|trace|report|out-of|input))\s+(\S+)", command):
            assert (ROOT / value).is_file(), f"{command}: {flag} {value} does not exist"


def test_the_readme_whatif_example_prints_what_it_says():
    command = next(c for c in re.findall(r"python -m explorer whatif [^`\n]*", README))
    out = subprocess.run([sys.executable, *shlex.split(command)[1:]], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Set num_speculative_tokens to 3" in out.stdout  # what the README quotes of it
