"""The headless CLI as a user runs it: exit codes, one-line errors, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def observatory(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


BAD_INPUTS = [
    (["run", "--policy", "bogus"], "unknown policy"),
    (["run", "--preset", "nope"], "unknown preset"),
    (["run", "--num-gpu-blocks", "0"], "--num-gpu-blocks: must be an integer from 1 to"),
    (["run", "--num-cpu-blocks", "-5"], "--num-cpu-blocks: must be an integer from 1 to"),
    (["run", "--n", "0"], "--n: must be an integer from 1 to"),
    (["run", "--policy", "watermark:1.5"], "watermark level must be in (0, 1]"),
    (["run", "--policy", "watermark:0"], "watermark level must be in (0, 1]"),
    (["run", "--policy", "reserve:x"], "policy 'reserve' takes no level"),
    (["run", "--policy", "reserve:"], "policy 'reserve' takes no level"),
    (["run", "--toggle-at", "10:reserve:0.5"], "policy 'reserve' takes no level"),
    (["run", "--toggle-at", "10"], "malformed --toggle-at"),
    (["run", "--toggle-at", "x:strict"], "malformed --toggle-at"),
    (["run", "--toggle-at", "10:fast"], "unknown policy"),
    (["run", "--num-gpu-blocks", "abc"], "must be an integer from 1 to 10,000,000, got 'abc'"),
    (["run", "--swap-space", "4", "--num-cpu-blocks", "9"], "not both"),
    (["run", "--cost", "warp=1"], "bad --cost item"),
    (["run", "--config", "/nonexistent/observatory.toml"], "cannot read config file"),
    (["run", "--frobnicate"], "unrecognized arguments"),
    (["replay", "--speed", "100", "x.jsonl"], "--speed must be between"),
    (["live", "--pace", "-1"], "--pace: must be a number >= 0"),
    (["live", "--pace", "abc"], "--pace: must be a number >= 0, got 'abc'"),
    (["serve", "--pace", "-1"], "--pace: must be a number >= 0"),
    (["live", "--connect", "127.0.0.1:1", "--pace", "5"], "give it to `observatory serve`"),
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
    for path, message in ((unknown, "unknown setting 'warp_factor'"), (broken, "not valid TOML")):
        result = observatory("run", "--config", str(path), "--no-record")
        assert result.returncode == 2 and message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_gpu_backend_without_cuda_is_a_one_line_error():
    from engine.adapters.v0.build import cuda_available

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
    assert kinds[-1] == "check"  # the recorder's final Check (engine.stream.reader.checked)
    kinds = [kind for kind in kinds if kind != "check"]
    # the tally closes the records, the index closes the file
    assert kinds[0] == "header" and kinds[-3:] == ["end", "tally", "index"]
    assert kinds.count("step") == 30
    assert "steps" in result.stderr  # the summary moved to stderr


# ---------------------------------------------------------------------- output
RECORDING = str(ROOT / "recordings" / "seed-5578-off.jsonl.zst")


def _one_line_exit_2(result: subprocess.CompletedProcess, message: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr
    assert result.stderr.strip().splitlines() == [f"observatory: error: {message}"]


@pytest.mark.parametrize("args", [["summary", RECORDING], ["summary", RECORDING, "--json"],
                                  ["export", RECORDING, "--format", "csv", "-o", "-"],
                                  ["compare", RECORDING, RECORDING, "--no-plot"],
                                  ["run", "--help"]],
                         ids=["summary", "summary --json", "export -o -", "compare", "--help"])
def test_a_full_stdout_is_one_line_and_exit_2(args):
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=ROOT, stdout=full,
                                stderr=subprocess.PIPE, text=True, timeout=300)
    _one_line_exit_2(result, "cannot write to stdout: No space left on device")


def test_closed_stdout_and_stdin_are_one_line_and_exit_2():
    closed_out = subprocess.run([sys.executable, "-m", "tui.cli", "summary", RECORDING],
                                cwd=ROOT, stderr=subprocess.PIPE, text=True, timeout=300,
                                pass_fds=(), preexec_fn=lambda: __import__("os").close(1))
    _one_line_exit_2(closed_out, "cannot write to stdout: stdout is closed")
    closed_in = subprocess.run([sys.executable, "-m", "tui.cli", "summary", "-"], cwd=ROOT,
                               capture_output=True, text=True, timeout=300,
                               preexec_fn=lambda: __import__("os").close(0))
    _one_line_exit_2(closed_in, "<stdin>: cannot read: stdin is closed")
    record_out = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--preset", "demo",
                                 "--max-steps", "3", "--record", "-"], cwd=ROOT,
                                stderr=subprocess.PIPE, text=True, timeout=300,
                                preexec_fn=lambda: __import__("os").close(1))
    _one_line_exit_2(record_out, "cannot record to -: stdout is closed; give another --record "
                                 "PATH or --no-record")


def test_a_broken_pipe_is_one_line_and_exit_2():
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "summary", RECORDING], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone before anything is written
    stderr = proc.stderr.read()
    proc.wait(timeout=300)
    _one_line_exit_2(subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr),
                     "cannot write to stdout: Broken pipe")


def test_a_failed_export_leaves_no_partial_file_and_keeps_the_old_one(tmp_path):
    import os
    import resource
    import signal

    out = tmp_path / "off.perfetto.json"
    out.write_text("the previous export\n")

    def small_files() -> None:  # a real write failure: EFBIG past 64 kB
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))

    result = subprocess.run([sys.executable, "-m", "tui.cli", "export", RECORDING, "--format",
                             "perfetto", "-o", str(out)], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, preexec_fn=small_files)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"observatory: error: cannot write {out}: File too large")
    assert out.read_text() == "the previous export\n"
    assert sorted(os.listdir(tmp_path)) == [out.name]  # no temporary file left behind
    ok = observatory("export", RECORDING, "--format", "perfetto", "-o", str(out))
    assert ok.returncode == 0, ok.stderr
    assert json.loads(out.read_text())["otherData"]["time"] == "simulated"
    assert sorted(os.listdir(tmp_path)) == [out.name]


# ---------------------------------------------------------------------- terminal safety
HOSTILE = "Aborted\x1b]0;pwned\x07\x1b[2J\r\x9b31m done"


def test_strings_from_a_file_are_escaped_before_printing():
    from engine.analysis.compare import RunMetrics, format_table
    from engine.analysis.summary import Summary, format_summary
    from engine.safe_text import safe

    assert safe(HOSTILE) == "Aborted\\x1b]0;pwned\\x07\\x1b[2J\\r\\x9b31m done"
    assert safe("plain ✓ text") == "plain ✓ text"
    summary = Summary(steps=1, finished_requests=0, aborted=True, abort_reason=HOSTILE,
                      abort_step=1, peak_gpu_kv_pct=0.0, peak_cpu_kv_pct=0.0, peak_swapped=0,
                      swap_outs=0, swap_ins=0, recompute_preemptions=0, prefill_blocked_steps=0,
                      policy_changes=0, prompt_tokens=0, generated_tokens=0, sim_seconds=0.0,
                      wall_seconds=0.0, end_reason=HOSTILE)
    metrics = RunMetrics(name=HOSTILE, policy=HOSTILE, steps=1, end=HOSTILE,
                         peak_cpu_kv_pct=0.0, peak_swapped=0, abort_step=None,
                         throughput_tok_s=None, ttft_mean_s=None, ttft_p99_s=None,
                         withheld_steps=0)
    for text in (format_summary(summary), format_table([metrics])):
        assert "pwned" in text
        assert not any(ord(c) < 32 and c != "\n" or 0x7f <= ord(c) < 0xa0 for c in text)


def test_an_error_quoting_a_file_is_escaped(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('policy = "\\u001b]0;pwned\\u0007"\n')
    result = observatory("run", "--config", str(config), "--no-record")
    assert result.returncode == 2
    assert "\x1b" not in result.stderr and "\\x1b" in result.stderr


def test_a_bad_header_spec_names_its_file_and_key(tmp_path):
    import zstandard

    with zstandard.ZstdDecompressor().stream_reader(open(RECORDING, "rb"),
                                                    read_across_frames=True) as reader:
        lines = reader.read().decode().splitlines()
    header = json.loads(lines[0])
    header["spec"]["requests"] = "5"
    bad = tmp_path / "bad.jsonl"
    lines = [json.dumps(header), *lines[1:]]
    # Seal it again as the recorder would (a writer that wrote this spec), so the spec check
    # is what fails, not the header block's CRC.
    block_end = next(i for i, line in enumerate(lines) if line.startswith('{"kind":"check"'))
    check = json.loads(lines[block_end])
    block = "".join(line + "\n" for line in lines[:block_end]).encode()
    check.update(lines=block_end, crc=zlib.crc32(block))
    lines[block_end] = json.dumps(check, separators=(",", ":"))
    bad.write_text("\n".join(lines) + "\n")
    result = observatory("verify", str(bad))
    _one_line_exit_2(result, f"{bad}: run spec: requests must be an integer from 1 to "
                             f"1,000,000, got str '5'")


def test_sweep_report_escapes_a_rows_strings(tmp_path):
    out = tmp_path / "s"
    made = observatory("sweep", "--preset", "demo", "--grid", "n=1", "--max-steps", "3",
                       "--serial", "--no-report", "-o", str(out))
    assert made.returncode == 0, made.stderr
    row = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    row.update(status="failed", message="[/bold]" + HOSTILE)
    (out / "results.jsonl").write_text(json.dumps(row) + "\n")
    result = observatory("sweep-report", str(out))
    assert result.returncode == 0, result.stderr
    assert "[/bold]Aborted\\x1b]0;pwned" in result.stdout and "\x1b" not in result.stdout


def test_the_tui_without_stdin_is_one_line():
    result = subprocess.run([sys.executable, "-m", "tui.cli", "replay", "-"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300,
                            preexec_fn=lambda: __import__("os").close(0))
    _one_line_exit_2(result, "stdin is closed: the TUI needs a terminal (for headless use: "
                             "observatory run, summary, ...)")


def test_a_bare_observatory_is_live_and_flags_alone_go_to_live():
    from tui.cli.registry import parse

    assert parse([]).subcommand.name == "live"
    args = parse(["--preset", "demo", "--window", "50"])
    assert (args.subcommand.name, args.preset, args.window) == ("live", "demo", 50)
    assert parse(["run", "--preset", "demo"]).subcommand.name == "run"
    assert parse(["replay", "x.jsonl"]).subcommand.fast_exit  # owns no file: skips teardown
    assert not parse(["sweep-report", "d"]).subcommand.fast_exit
