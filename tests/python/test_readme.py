# The Python quick start runs as written: the first ```python block that imports cera in
# README.md and in docs/python.md (the two must be the same three lines), run in a home folder
# whose model cache holds SmolLM2 (the path the snippet names).
import re
import subprocess
import sys

import pytest

from conftest import REPO


def quick_start(doc):
    text = (REPO / doc).read_text(encoding="utf-8")
    for block in re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M):
        if "import cera" in block:
            return block
    pytest.fail(f"{doc} has no ```python block that imports cera")


def test_docs_and_readme_agree():
    assert quick_start("docs/python.md") == quick_start("README.md")


def test_readme_quick_start_runs(smollm2_path, tmp_path):
    code = quick_start("README.md")
    assert len(code.strip().splitlines()) <= 3, code
    models = tmp_path / "home" / ".cache" / "cera" / "models"
    models.mkdir(parents=True)
    (models / "SmolLM2-135M-Instruct.Q4_1.gguf").symlink_to(smollm2_path)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=240,
                          env={"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout, done.stdout
