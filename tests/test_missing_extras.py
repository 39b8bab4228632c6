"""A plain `pip install -e .` beside a user's own vLLM may lack Ray: `sweep` then says so in one
line, exit 2, and writes nothing (docs/install.md promises one line, never a traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WITHOUT_RAY = """
import sys
sys.modules["ray"] = None  # as if not installed: `import ray` fails, find_spec says None
from tui.cli import entry
sys.argv = ["observatory", *sys.argv[1:]]
entry()
"""


def test_sweep_without_ray_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "sweep"
    done = subprocess.run([sys.executable, "-c", WITHOUT_RAY, "sweep", "--preset", "demo",
                           "--grid", "policy=off,strict", "-o", str(out)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "Ray, which is not installed" in done.stderr and "--serial" in done.stderr
    assert not out.exists()
