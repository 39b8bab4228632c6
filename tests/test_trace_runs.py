"""Runs from traces (--trace) through the installed engine, V0 or V1 (the same file runs in
every venv; V1 needs PYTHONHASHSEED=0): every request of each format's fixture finishes with
its forced lengths and its line number as its id, two runs decide the same, a bad row is one
line and exit 2 before the engine is built, and `verify` replays a trace recording and refuses a changed trace."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from engine.analysis.summary import SummaryBuilder, summarize
from engine.exit_status import ExitStatus
from engine.spec import RunSpec
from engine.stream.recorder import Recorder
from engine.stream.records import STEP_TYPES, Arrivals
from trace_fixtures import FIXTURES, plain
from v1_required import V1_INSTALLED, require_hash_seed

require_hash_seed()

ROOT = Path(__file__).resolve().parents[1]


def run(spec: RunSpec, record: Path | None = None) -> list[Any]:
    from engine.session import Session

    session = Session(spec)
    items: list[Any] = []
    session.subscribe(items.append)
    recorder = Recorder(record, flush_interval_s=0.05,
                        fold=SummaryBuilder) if record is not None else None
    if recorder is not None:
        session.subscribe(recorder.sink)
    try:
        session.run()
    finally:
        if recorder is not None:
            recorder.close()
    return items


@pytest.mark.parametrize("name", ["mooncake.jsonl", "azure.csv", "burstgpt.csv",
                                  "burstgpt_sessions.csv", "vllm_bench.json"])
def test_every_request_finishes_with_its_forced_lengths(name):
    expected = plain(name)
    items = run(RunSpec(trace=str(FIXTURES / name), trace_limit=500))
    summary = summarize(items)
    assert summary.end_reason == "completed"
    assert summary.finished_requests == len(expected)
    assert summary.generated_tokens == sum(o for _, o in expected)
    if hasattr(summary, "cached_tokens_per_request"):  # V1: the prompts' tokens, and those
        # computed plus those each request found cached
        assert summary.prompt_tokens == sum(i for i, _ in expected)
        assert (summary.prompt_tokens_computed + summary.cached_tokens_per_request
                == sum(i for i, _ in expected))
    else:
        assert summary.prompt_tokens == sum(i for i, _ in expected)
    assert summary.trace is not None and summary.trace.requests == len(expected)
    arrived = [rid for a in items if isinstance(a, Arrivals) for rid in a.request_ids]
    first_line = 2 if name.endswith(".csv") else 1
    assert arrived == [str(first_line + i) for i in range(len(expected))]


def _decisions(items: list[Any]) -> list[Any]:
    out = []
    for item in items:
        if type(item) in STEP_TYPES:
            out.append(msgspec.structs.replace(item, wall_s=0.0, exec_s=0.0))
        elif isinstance(item, Arrivals):
            out.append(item)
    return out


def test_two_runs_of_a_trace_decide_the_same():
    spec = RunSpec(trace=str(FIXTURES / "burstgpt.csv"), trace_speed=4.0, num_gpu_blocks=300)
    first, second = _decisions(run(spec)), _decisions(run(spec))
    assert len(first) > 30 and first == second


def test_skip_bad_runs_the_good_rows_and_counts_the_bad(tmp_path):
    lines = (FIXTURES / "azure.csv").read_text().splitlines()
    lines[7] = lines[7].rsplit(",", 2)[0] + ",-3,9"
    path = tmp_path / "bad.csv"
    path.write_text("\n".join(lines) + "\n")
    summary = summarize(run(RunSpec(trace=str(path), trace_skip_bad=True)))
    assert summary.end_reason == "completed"
    assert summary.trace.skipped == 1 and summary.trace.first_skipped_line == 8
    assert summary.finished_requests == len(lines) - 2


def _observatory(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)


def test_a_bad_row_is_one_line_and_exit_2_before_the_engine_is_built(tmp_path):
    """The trace is read once against the model's context before vLLM loads (on V1 a bad line
    came after a 48-s build): a bad row anywhere in it is refused then, in one line."""
    lines = (FIXTURES / "burstgpt.csv").read_text().splitlines()
    lines[20] = lines[20].split(",", 1)[0] + ",ChatGPT,12x,5,17,Conversation log"
    path = tmp_path / "bad.csv"
    path.write_text("\n".join(lines) + "\n")
    proc = _observatory("run", "--trace", str(path), "--no-record", "--json")
    assert proc.returncode == ExitStatus.USAGE, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "line 21" in line]
    assert len(errors) == 1 and str(path) in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""  # nothing ran


def test_verify_replays_a_trace_recording_and_refuses_a_changed_trace(tmp_path):
    from engine.analysis.verify import verify_file

    trace = tmp_path / "trace.jsonl"
    shutil.copy(FIXTURES / "mooncake.jsonl", trace)
    recording = tmp_path / "run.jsonl"
    run(RunSpec(trace=str(trace), trace_limit=12, enable_prefix_caching=V1_INSTALLED),
        record=recording)
    result = verify_file(str(recording))
    assert result.ok, result.message
    trace.write_text(trace.read_text().replace('"output_length": 12', '"output_length": 13'))
    proc = _observatory("verify", str(recording))
    assert proc.returncode == ExitStatus.USAGE
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "sha256" in lines[0] and str(trace) in lines[0], proc.stderr


@pytest.mark.skipif(V1_INSTALLED, reason="V0's output-length model (V1 has none)")
def test_a_trace_forces_lengths_over_the_presets_length_model():
    """seed-5578-fitted ends every V0 sequence early by its length model; a trace's lengths
    win, so every request still generates exactly its trace's output."""
    from engine.spec import preset_spec

    spec = preset_spec("seed-5578-fitted", trace=str(FIXTURES / "azure.csv"), eos_prob=0.2)
    summary = summarize(run(spec))
    assert summary.finished_requests == len(plain("azure.csv"))
    assert summary.generated_tokens == sum(o for _, o in plain("azure.csv"))
