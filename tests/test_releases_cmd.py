"""`observatory releases` (issue 39): one workload through several releases' own schedulers,
one venv each, on Ray; the table names the first step where a release decides differently
from the previous one, and what differed.

The runs use the venvs CI builds for its V1 lines anyway (vllm0180 and vllm0240, in
OBSERVATORY_VENV_ROOT or ~/.cache/vllm-observatory, found by the same key as .ci/venv): the
test skips, saying which, when one is absent (building one here would take minutes and the
network). Ray runs in fresh network and PID namespaces, as in tests/test_sweep_ray.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.adapters.versions import KNOWN
from engine.releases import venvs

ROOT = Path(__file__).resolve().parents[1]
PAIR = ("0.18.0", "0.24.0")
WORKLOAD = ("--preset", "v1-concurrent-prefill", "--max-steps", "400")
"""A workload whose decisions differ between 0.18.0 and 0.24.0: vLLM's own full-ISL check
(`scheduler_reserve_full_isl`, on by default from 0.19, on in this preset) refuses admissions
0.18's scheduler, which has no such check, makes. `observatory releases` runs each release as
it ships, so 0.18 runs the preset without it (a note says so)."""


def _missing() -> list[str]:
    root = venvs.default_root()
    rows = {r.version: r for r in KNOWN}
    return [f"{v} ({root / venvs.venv_name(rows[v])})" for v in PAIR
            if not venvs.ready(rows[v], root)]


def releases(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", "releases", *args],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=1800)


def test_bad_input_is_one_line_before_any_venv_is_built(tmp_path):
    cases = [
        ((["--releases", "0.29.0"]), "name the workload"),
        ((["--releases", "0.99.0", "--preset", "v1-thrash"]), "not in the release table"),
        ((["--releases", "0.34.0..0.18.0", "--preset", "v1-thrash"]), "ends before it starts"),
        ((["--releases", "0.29.0", "--from", str(tmp_path / "none.jsonl")]), "none.jsonl"),
    ]
    for argv, words in cases:
        out = releases(*argv, "--serial", "--venv-root", str(tmp_path / "venvs"))
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1, out.stderr
        assert lines[0].startswith("observatory: error: ") and words in lines[0], lines[0]
    assert not (tmp_path / "venvs").exists()


@pytest.mark.skipif(bool(_missing()), reason=f"needs the CI venvs of {', '.join(PAIR)}: "
                                             f"missing {', '.join(_missing())}")
def test_the_first_differing_step_is_named_with_what_differed(tmp_path):
    from test_sweep_ray import Namespace, _can_unshare

    from engine.analysis.divergence import decision_diff, first_difference
    from engine.stream.reader import load

    out_dir = tmp_path / "runs"
    argv = [*WORKLOAD, "--releases", ",".join(PAIR), "-o", str(out_dir)]
    import importlib.util

    if _can_unshare() and importlib.util.find_spec("ray"):  # on Ray, as a user runs it
        ray_tmp = Path("/tmp") / f"obs-rel-{tmp_path.name[-8:]}"
        ns = Namespace([sys.executable, "-m", "engine.cli", "releases", *argv, "--workers",
                        "2", "--node-ip-address", "127.0.0.1", "--ray-temp-dir", str(ray_tmp)],
                       tmp_path / "log")
        code, text = ns.wait(1800), ns.output()
    else:
        done = releases(*argv, "--serial")
        code, text = done.returncode, done.stdout + done.stderr
    assert code == 0, text[-3000:]
    old, new = (load(str(out_dir / f"vllm-{v}.jsonl.zst")) for v in PAIR)
    step = first_difference(old.steps, new.steps)
    assert step is not None, "the workload no longer tells these releases apart"
    fields = decision_diff(old.steps[step - old.steps[0].step], new.steps[step - new.steps[0].step])
    assert f"vLLM {PAIR[0]} has no full-ISL option" in " ".join(text.split())
    row = next(line for line in text.splitlines() if line.startswith(PAIR[1] + " "))
    assert f"step {step:,}" in row, row
    said = re.search(rf"{re.escape(PAIR[1])} vs {re.escape(PAIR[0])}, first at step "
                     rf"{step:,}: (.*)", " ".join(text.split()))
    assert said, text[-3000:]
    words = {"prefills": "admitted/prefilled", "recomputed": "preempted",
             "batched_tokens": "tokens scheduled", "finished": "finished",
             "decode_groups": "decoding requests", "withheld": "admission withheld"}
    assert any(words.get(f, f) in said.group(1) for f in fields), (fields, said.group(1))
    compare = subprocess.run([sys.executable, "-m", "engine.cli", "compare",
                              *(str(out_dir / f"vllm-{v}.jsonl.zst") for v in PAIR)],
                             capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert compare.returncode == 0, compare.stderr  # each run is kept for compare and replay
