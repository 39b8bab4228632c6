"""Any recording is a workload (issue #38), on vLLM's V1 engine: `observatory exec --sim` of a
verl-style `LLM(...)` script (prefix caching, n=4 samples per prompt, its engine core in a
process of its own) records each request's facts from vLLM's own block hashes, exports to a
trace that re-runs every decision, verifies from its own requests, and fails verify at a
changed step; `fork` forks a V1 run. Needs a V1 vLLM and PYTHONHASHSEED=0; CI runs it on every
V1 line (0.18, 0.29, 0.33, 0.34).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.registry import main
from rerun_checks import (steps_of, trace_reruns_every_decision,
                          verify_passes_and_names_a_changed_step)
from v1_required import needs_v1

pytestmark = needs_v1

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "fixtures" / "attach" / "v1_verl_rollout.py"
MODEL = str(ROOT / "engine" / "adapters" / "models" / "llama-16k")


@pytest.fixture(scope="module")
def rollout(tmp_path_factory) -> Path:
    runs = tmp_path_factory.mktemp("v1exec")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "exec", "--sim", "--record",
                           str(runs), "--", sys.executable, str(SCRIPT), MODEL],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = runs.glob("*.jsonl.zst")
    return path


def test_a_v1_exec_recording_keeps_each_requests_facts(rollout):
    from engine.stream.reader import load

    recording = load(rollout)
    ids = [rid for a in recording.arrivals for rid in a.request_ids]
    assert len(ids) == 24  # 6 prompts x n=4: vLLM's frontend makes 4 requests of each
    facts = [(n, m, p) for a in recording.arrivals for n, m, p in zip(a.n, a.max_tokens,
                                                                     a.prefix)]
    assert {(n, m) for n, m, _ in facts} == {(1, 40)}
    # a prompt's four samples share its every block (vLLM's prefix cache sees one prompt):
    # the first of them numbers its blocks, the three others share them all
    assert sum(1 for _, _, (shared, own) in facts if own == 0 and shared > 0) == 18
    lens = [n for s in recording.steps for n in (s.finished_lens or ())]
    assert lens == [40] * 24
    assert sum(s.prefix_hit_tokens for s in recording.steps) > 0


def test_a_v1_exec_recording_is_a_trace_that_reruns_every_decision(rollout, tmp_path, capsys):
    trace_reruns_every_decision(rollout, tmp_path, capsys)


def test_a_v1_exec_recording_verifies_from_its_requests(rollout, tmp_path, capsys):
    steps = steps_of(rollout)
    verify_passes_and_names_a_changed_step(rollout, tmp_path, capsys,
                                           step=steps[len(steps) // 2].step)


def test_fork_switches_a_v1_run_at_a_step(tmp_path, capsys):
    from engine.stream.reader import load

    original = tmp_path / "thrash.jsonl.zst"
    assert main(["run", "--preset", "v1-thrash", "--max-steps", "800", "--record",
                 str(original)]) == 0
    out = tmp_path / "fork.jsonl.zst"
    assert main(["fork", str(original), "--at", "300", "--policy", "whole-context",
                 "--max-steps", "800", "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "the fork ran 800 steps without aborting" in said
    fork = load(out)
    before, after = load(original).steps, fork.steps
    assert [s.preemptions_total for s in before[:300]] == \
        [s.preemptions_total for s in after[:300]]
    assert after[-1].preemptions_total < before[-1].preemptions_total  # the fix's point
