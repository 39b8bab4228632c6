"""Trace files read as the formats' documentation describes them (engine/traces), and every
kind of damaged trace refused in one line naming its line: no engine needed, so these run in
every venv.

The fixtures (tests/fixtures/traces/, made by make_fixtures.py there) are checked against the
file itself, read here with the standard library: the readers must agree with a plain reading
of the format, not with numbers copied into the test."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.exit_status import ExitStatus, for_error
from engine.spec import RunSpec
from engine.traces.detect import detect, head_of
from engine.traces.prompts import BLOCK_TOKENS, PrefixAllowance, prompt_tokens
from engine.traces.source import TraceSource, resolve
from engine.traces.stats import label
from engine.workload import Workload
from trace_fixtures import FIXTURES, plain

ROOT = Path(__file__).resolve().parents[1]


FORMATS = {"mooncake.jsonl": "mooncake", "azure.csv": "azure", "burstgpt.csv": "burstgpt",
           "burstgpt_sessions.csv": "burstgpt", "vllm_bench.json": "vllm-bench"}


def read(path: Path | str, max_model_len: int = 2048, **fields) -> tuple[list, TraceSource]:
    spec = resolve(RunSpec(trace=str(path), **fields))
    source = TraceSource(spec, max_model_len)
    return list(source.requests()), source


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_format_reads_the_files_requests(name):
    requests, source = read(FIXTURES / name)
    expected = plain(name)
    assert [(r.input_len, r.output_len) for r in requests] == expected
    assert source.stats.requests == len(expected)
    assert source.stats.prompt_tokens == sum(i for i, _ in expected)
    assert source.stats.output_tokens == sum(o for _, o in expected)
    arrivals = [r.arrival_s for r in requests]
    assert arrivals[0] == 0.0 and arrivals == sorted(arrivals) and arrivals[-1] > 0


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_auto_detects_each_format(name):
    path = FIXTURES / name
    assert detect(str(path), head_of(str(path))) == FORMATS[name]
    assert resolve(RunSpec(trace=str(path))).trace_format == FORMATS[name]


def test_request_ids_are_line_numbers():
    requests, _ = read(FIXTURES / "azure.csv")
    assert [r.line for r in requests] == list(range(2, 2 + len(requests)))  # line 1: header
    spec = resolve(RunSpec(trace=str(FIXTURES / "mooncake.jsonl")))
    ids = [r.request_id for r in Workload(spec, 2048).initial()]
    assert ids == [str(n) for n in range(1, 41)]


def test_mooncake_times_are_milliseconds_and_azure_a_wall_clock():
    requests, _ = read(FIXTURES / "mooncake.jsonl")
    first = json.loads((FIXTURES / "mooncake.jsonl").read_text().splitlines()[3])
    assert requests[3].arrival_s == pytest.approx(first["timestamp"] / 1000.0)
    azure, _ = read(FIXTURES / "azure.csv")
    second = (FIXTURES / "azure.csv").read_text().splitlines()[2].split(",")[0]
    assert azure[1].arrival_s == pytest.approx(float("0." + second.split(".")[1][:6]), abs=1e-6)


def test_slice_speed_and_limit():
    whole, _ = read(FIXTURES / "burstgpt.csv")
    start = whole[10].arrival_s
    part, source = read(FIXTURES / "burstgpt.csv", trace_start=start, trace_limit=5,
                        trace_speed=2.0)
    kept = [r for r in whole if r.arrival_s >= start][:5]
    assert [r.line for r in part] == [r.line for r in kept]
    assert [r.arrival_s for r in part] == [(r.arrival_s - start) / 2.0 for r in kept]
    assert source.stats.requests == 5


def test_resolve_records_path_format_and_sha256():
    path = FIXTURES / "azure.csv"
    spec = resolve(RunSpec(trace=os.path.relpath(path)))
    assert spec.trace == str(path.resolve())
    assert spec.trace_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert label(spec.to_dict()).startswith("azure.csv " + spec.trace_sha256[:12])
    other = resolve(RunSpec(trace=str(FIXTURES / "burstgpt.csv"), trace_limit=9))
    assert label(other.to_dict()) != label(spec.to_dict())


def test_a_changed_trace_is_refused_in_one_line(tmp_path):
    copy = tmp_path / "t.csv"
    copy.write_bytes((FIXTURES / "azure.csv").read_bytes())
    spec = resolve(RunSpec(trace=str(copy)))
    copy.write_bytes(copy.read_bytes().replace(b",117,", b",118,"))
    with pytest.raises(ConfigError) as err:
        resolve(spec)
    assert "sha256" in str(err.value) and "\n" not in str(err.value)


def _damaged(tmp_path: Path) -> dict[str, tuple[Path, dict, int | None]]:
    """name -> (file, extra fields, the line the error must name or None)."""
    moon = (FIXTURES / "mooncake.jsonl").read_text().splitlines()
    azure = (FIXTURES / "azure.csv").read_text().splitlines()
    burst = (FIXTURES / "burstgpt.csv").read_text().splitlines()
    files = {
        "cut line": ("cut.jsonl", "\n".join(moon[:5] + [moon[5][:30]] + moon[6:]), 6),
        "bad number": ("num.jsonl", "\n".join(moon[:3] + [moon[3].replace(
            '"input_length": ', '"input_length": "x')]), 4),
        "missing field": ("miss.jsonl", "\n".join(moon[:2] + ['{"timestamp": 9}']), 3),
        "negative length": ("neg.csv", "\n".join(azure[:4] + [azure[4].rsplit(",", 2)[0]
                                                            + ",-5,20"]), 5),
        "time backwards": ("back.csv", "\n".join(burst[:4] + [
            "1,ChatGPT,100,20,120,Conversation log"]), 5),
        "prompt too long": ("long.jsonl", "\n".join(moon[:2] + [
            '{"timestamp": 9000, "input_length": 4096, "output_length": 3}']), 3),
        "short row": ("short.csv", "\n".join(azure[:3] + ["2023-11-16 18:16:00.0,100"]), 4),
        "bad date": ("date.csv", "\n".join(azure[:3] + ["yesterday,100,20"]), 4),
        "wrong columns": ("cols.csv", "TIMESTAMP,Foo,Bar\n1,2,3\n", None),
        "empty file": ("empty.jsonl", "", None),
        "binary garbage": ("garbage.bin", None, None),
        "bench without lengths": ("bench.json", json.dumps({"duration": 3.0, "completed": 9}),
                                  None),
    }
    out = {}
    for name, (file, text, line) in files.items():
        path = tmp_path / file
        if text is None:
            path.write_bytes(bytes((i * 197 + 11) % 256 for i in range(3000)))
        else:
            path.write_text(text + ("\n" if text else ""))
        out[name] = (path, {}, line)
    return out


DAMAGED = ["cut line", "bad number", "missing field", "negative length", "time backwards",
           "prompt too long", "short row", "bad date", "wrong columns", "empty file",
           "binary garbage", "bench without lengths"]


@pytest.mark.parametrize("name", DAMAGED)
def test_a_damaged_trace_is_one_line_naming_its_line(tmp_path, name):
    path, fields, line = _damaged(tmp_path)[name]
    with pytest.raises(ConfigError) as err:
        read(path, **fields)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    assert for_error(err.value) == ExitStatus.USAGE
    if line is not None:
        assert f"line {line}:" in message


@pytest.mark.parametrize("name", ["cut line", "negative length", "time backwards",
                                  "prompt too long", "short row"])
def test_skip_bad_counts_the_skipped_lines(tmp_path, name):
    path, fields, line = _damaged(tmp_path)[name]
    requests, source = read(path, trace_skip_bad=True, **fields)
    assert source.stats.skipped == 1 and source.stats.first_skipped_line == line
    assert line not in [r.line for r in requests] and len(requests) >= 2


def test_the_trace_format_can_be_forced(tmp_path):
    path = tmp_path / "noext"
    path.write_bytes((FIXTURES / "burstgpt.csv").read_bytes())
    requests, _ = read(path, trace_format="burstgpt")
    assert len(requests) == len(plain("burstgpt.csv"))
    with pytest.raises(ConfigError) as err:
        read(path, trace_format="azure")
    assert "no 'ContextTokens' column" in str(err.value)  # columns match without case


def test_mooncake_hash_ids_become_shared_blocks():
    a = prompt_tokens(1, 1300, [7, 8, 100])
    b = prompt_tokens(2, 1200, [7, 8, 101])
    c = prompt_tokens(3, 1200, [9, 8, 100])
    assert len(a) == 1300 and len(b) == 1200
    assert a[:2 * BLOCK_TOKENS] == b[:2 * BLOCK_TOKENS]
    assert a[2 * BLOCK_TOKENS:2 * BLOCK_TOKENS + 16] != b[2 * BLOCK_TOKENS:2 * BLOCK_TOKENS + 16]
    assert a[:16] != c[:16]  # the first id differs: nothing is shared
    assert prompt_tokens(4, 700, None)[:16] != prompt_tokens(5, 700, None)[:16]
    allowance = PrefixAllowance(block_size=16)
    allowance.add(1300, [7, 8, 100], repeat=False)
    assert allowance.tokens == 0
    allowance.add(1200, [7, 8, 101], repeat=False)
    assert allowance.tokens == 2 * BLOCK_TOKENS
    allowance.add(1200, None, repeat=True)  # a second sample: the whole prompt but its last
    assert allowance.tokens == 2 * BLOCK_TOKENS + 1184


def test_trace_flags_come_from_the_spec():
    from engine.options import iter_flags

    flags = dict(iter_flags(RunSpec))
    assert {flags[f] for f in ("trace", "trace_format", "trace_start", "trace_limit",
                               "trace_speed", "trace_n", "trace_skip_bad")} == {
        "--trace", "--trace-format", "--trace-start", "--trace-limit", "--trace-speed",
        "--trace-n", "--trace-skip-bad"}


@pytest.mark.parametrize("command", ["run", "serve", "sweep", "fit", "live"])
def test_every_run_command_takes_trace(command):
    help_text = subprocess.run([sys.executable, "-m", "tui.cli", command, "--help"],
                               capture_output=True, text=True, cwd=ROOT, timeout=120).stdout
    for flag in ("--trace FILE", "--trace-format", "--trace-limit", "--trace-speed",
                 "--trace-n", "--trace-skip-bad", "--trace-start"):
        assert flag in help_text, (command, flag)


@pytest.mark.parametrize("case", ["missing", "garbage"])
def test_cli_refuses_a_bad_trace_before_the_engine(tmp_path, case):
    path = tmp_path / "t.jsonl"
    if case == "garbage":
        path.write_bytes(bytes((i * 197 + 11) % 256 for i in range(3000)))
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "run", "--trace", str(path),
                           "--no-record"], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == ExitStatus.USAGE
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "Traceback" not in proc.stderr
