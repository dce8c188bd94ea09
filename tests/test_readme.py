"""The README's Python snippets run as written, in order, in a fresh interpreter (each builds on the ones before,
as a reader typing them into one session would)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def snippets() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_the_readme_has_python_snippets():
    assert len(snippets()) >= 3 and snippets()[0].startswith("import rlrun")


@pytest.mark.slow
def test_the_readmes_python_snippets_run_verbatim(tmp_path):
    pytest.importorskip("rsl_rl")
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("onnxruntime")
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(snippets())], cwd=tmp_path, capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "logs").is_dir()
