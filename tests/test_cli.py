"""The headless CLI as a user runs it: exit codes, one-line errors, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def observatory(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


BAD_INPUTS = [
    (["run", "--policy", "bogus"], "unknown policy"),
    (["run", "--preset", "nope"], "unknown preset"),
    (["run", "--num-gpu-blocks", "0"], "--num-gpu-blocks must be a positive integer"),
    (["run", "--num-cpu-blocks", "-5"], "--num-cpu-blocks must be a positive integer"),
    (["run", "--n", "0"], "--n must be at least 1"),
    (["run", "--policy", "watermark:1.5"], "watermark level must be in (0, 1]"),
    (["run", "--policy", "watermark:0"], "watermark level must be in (0, 1]"),
    (["run", "--toggle-at", "10"], "malformed --toggle-at"),
    (["run", "--toggle-at", "x:strict"], "malformed --toggle-at"),
    (["run", "--toggle-at", "10:fast"], "unknown policy"),
    (["run", "--num-gpu-blocks", "abc"], "invalid int value"),
    (["run", "--swap-space", "4", "--num-cpu-blocks", "9"], "not both"),
    (["run", "--cost", "warp=1"], "bad --cost item"),
    (["run", "--config", "/nonexistent/observatory.toml"], "cannot read config file"),
    (["run", "--frobnicate"], "unrecognized arguments"),
    (["replay", "--speed", "100", "x.jsonl"], "--speed must be between"),
]


@pytest.mark.parametrize("args, message", BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(args, message):
    result = observatory(*args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "error:" in lines[0] and message in lines[0]
    assert "Traceback" not in result.stderr


def test_prompt_longer_than_the_context_is_refused():
    result = observatory("run", "--preset", "demo", "--prompt-len", "5000", "--no-record")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("observatory: error: --prompt-len 5000")
    assert "Traceback" not in result.stderr


def test_bad_config_files(tmp_path):
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('preset = "demo"\nwarp_factor = 9\n')
    broken = tmp_path / "broken.toml"
    broken.write_text("preset = \n")
    for path, message in ((unknown, "unknown setting(s) warp_factor"), (broken, "not valid TOML")):
        result = observatory("run", "--config", str(path), "--no-record")
        assert result.returncode == 2 and message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_gpu_backend_without_cuda_is_a_one_line_error():
    from engine.adapters.build import cuda_available

    if cuda_available():
        pytest.skip("this machine has CUDA")
    result = observatory("run", "--backend", "gpu", "--no-record")
    assert result.returncode == 2
    assert result.stderr.strip() == ("observatory: error: the gpu backend needs a CUDA device "
                                     "and none was found: use --backend sim")


def test_unwritable_record_path_is_a_one_line_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = observatory("run", "--preset", "demo", "--record", str(blocker / "x.jsonl"))
    assert result.returncode == 2
    assert "cannot record to" in result.stderr and "Traceback" not in result.stderr


def test_run_json_summary_and_exit_code_3_on_abort(tmp_path):
    result = observatory("run", "--preset", "demo", "--json", "--record",
                         str(tmp_path / "r.jsonl"))
    assert result.returncode == 3, result.stderr
    summary = json.loads(result.stdout)
    expected = {"steps", "finished_requests", "aborted", "abort_reason", "abort_step",
                "peak_gpu_kv_pct", "peak_cpu_kv_pct", "peak_swapped", "swap_outs", "swap_ins",
                "recompute_preemptions", "prefill_blocked_steps", "policy_changes",
                "prompt_tokens", "generated_tokens", "sim_seconds", "wall_seconds"}
    assert expected <= set(summary)
    assert summary["aborted"] is True and summary["abort_step"] == summary["steps"]
    assert "lack of CPU swap space" in summary["abort_reason"]
    assert "step " in result.stderr  # the progress line


def test_run_with_toggle_exits_0(tmp_path):
    result = observatory("run", "--preset", "demo", "--toggle-at", "100:strict", "--max-steps",
                         "400", "--json", "--no-record")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["steps"] == 400 and summary["policy_changes"] == 1
    assert summary["end_reason"] == "max_steps" and not summary["aborted"]


def test_record_to_stdout_is_pure_jsonl():
    result = observatory("run", "--preset", "demo", "--max-steps", "30", "--record", "-")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    kinds = [json.loads(line)["kind"] for line in lines]
    assert kinds[0] == "header" and kinds[-1] == "end" and kinds.count("step") == 30
    assert "steps" in result.stderr  # the summary moved to stderr
