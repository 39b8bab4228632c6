"""`observatory exec` on a vLLM it cannot attach to (issue 27, item 7): the user's command runs
to its end exactly as without exec, after one warning line; `--sim`, which only an attached
engine can honour, is refused in one line with exit 2.

exec decides on the installed vLLM's package metadata alone (engine.adapters.versions reads it
without importing vLLM), so the release outside the families is a dist-info for vLLM 0.17.1
put first on the path: the decision sees what it would see in a real 0.17.1 environment, and
the script never imports vLLM, so no vLLM code is being imitated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import os, sys
ours = sorted(k for k in os.environ if k.startswith("OBSERVATORY_"))
boot = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if "attached" in p]
hooked = "sitecustomize" in sys.modules and "observatory" in repr(sys.modules["sitecustomize"])
print("ENV", ours, boot, hooked)
print("the script ran to its end")
sys.exit(7)
"""


def _outside_the_families(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    info = site / "vllm-0.17.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.17.1\n")
    (info / "RECORD").write_text("")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}


def test_exec_runs_the_command_unwatched_with_one_warning(tmp_path):
    env = _outside_the_families(tmp_path)
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "exec", "--record",
                           str(tmp_path / "runs"), "--", sys.executable, str(script)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 7, proc.stderr  # the command's own status
    assert "the script ran to its end" in proc.stdout
    assert "ENV [] [] False" in proc.stdout  # nothing of ours reached it
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("observatory exec: vLLM 0.17.1 is not supported")
    assert "nearest supported release is" in lines[0] and "unwatched" in lines[0]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("extra", [[], ["--record", "runs"]])
def test_exec_sim_on_a_vllm_outside_the_families_is_one_line(tmp_path, extra):
    env = _outside_the_families(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "exec", "--sim", *extra, "--",
                           sys.executable, "-c", "print('ran')"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "ran" not in proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("observatory: error: exec --sim needs a "
                                                   "vLLM the observatory can attach to"), \
        proc.stderr
    assert "0.17.1" in lines[0]
