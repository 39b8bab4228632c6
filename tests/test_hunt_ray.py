"""`observatory hunt` on real Ray (issue #40): a local runtime of 2 workers, in fresh network
and PID namespaces (tests/test_sweep_ray.py's Namespace: loopback only, nothing outlives
it), finds what the same hunt finds one workload at a time in this process: the same
findings, from the same workloads, shrunk to the same size. CI: the full suite on vllm050.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from test_sweep_ray import ROOT, Namespace, _can_unshare

pytestmark = pytest.mark.skipif(not _can_unshare(),
                                reason="needs root and unshare (network + PID namespaces)")

ARGS = ["--seed", "11", "--workloads", "8", "--shrink-runs", "6"]  # finds one: workload 2


def _findings(directory: Path) -> list[tuple]:
    report = json.loads((directory / "report.json").read_text())
    return [(f["detector"], f["policy"], f["workload"], f["state"], f["minimal_requests"])
            for f in report["findings"]]


def test_a_hunt_on_ray_finds_what_the_serial_hunt_finds(tmp_path):
    ray_dir = tempfile.mkdtemp(prefix="obs-ray-", dir="/tmp")
    try:
        ns = Namespace([sys.executable, "-m", "engine.cli", "hunt", *ARGS, "--workers", "2",
                        "--node-ip-address", "127.0.0.1", "--ray-temp-dir", ray_dir,
                        "-o", str(tmp_path / "ray")], tmp_path / "log.txt")
        code = ns.wait()
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert code in (0, 1), ns.output()[-3000:]
    serial = subprocess.run(
        [sys.executable, "-m", "engine.cli", "hunt", *ARGS, "--serial", "-o",
         str(tmp_path / "serial")], env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
        capture_output=True, text=True, timeout=900)
    assert serial.returncode == code, serial.stderr[-3000:]
    assert _findings(tmp_path / "ray") == _findings(tmp_path / "serial") != []
    report = json.loads((tmp_path / "ray" / "report.json").read_text())
    assert report["workloads"] == 8 and not report["errors"]
