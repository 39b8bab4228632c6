"""Recordings (issue #3): writer, reader, summary, verify, export, compare, follow.

Real runs use the small `demo` preset (off aborts near step 211 in about half a second); the
damaged-file cases use hand-made files, since no real writer produces them on purpose.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from engine.errors import ConfigError
from engine.stream.reader import RecordingError, follow, load
from engine.stream.run import Recording
from engine.analysis.summary import SummaryBuilder
from engine.stream.recorder import Recorder, default_recording_path
from engine.stream.records import (SCHEMA_VERSION, Arrivals, Check, EngineAborted, Header,
                                   PolicyChanged, RunFinished, StepRecord, decode_record, encode)
from engine.spec import preset_spec

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


# ---- helpers -------------------------------------------------------------------------------

def make_header(**over: Any) -> Header:
    fields: dict[str, Any] = dict(
        schema=SCHEMA_VERSION, observatory_version="0.1.0", vllm_version="0.5.0.post1",
        backend="sim", model="opt-125m", spec=preset_spec("demo").to_dict(), engine_config={},
        started_at="2026-01-01T00:00:00+00:00", host="test")
    fields.update(over)
    return Header(**fields)


def make_step(i: int, **over: Any) -> StepRecord:
    fields: dict[str, Any] = dict(
        step=i, wall_s=i * 0.001, sim_s=(i + 1) * 0.01, sim_step_s=0.01, policy="off",
        running=4, swapped=i % 3, waiting=10, running_seqs=16, gpu_used=100 + i % 50,
        gpu_total=512, cpu_used=(i * 7) % 256, cpu_total=256, batched_tokens=300,
        token_budget=1024, prefills=[(f"r{i}", 120)] if i % 5 == 0 else [], decode_groups=4,
        decode_seqs=16, swapped_out=[f"r{i}"] if i % 10 == 3 else [],
        swapped_in=[f"r{i - 4}"] if i % 10 == 7 else [], recomputed=[], ignored=[], finished=[],
        first_tokens=[], prompt_tokens=120 if i % 5 == 0 else 0, generated_tokens=16,
        withheld=False, held_back=0)
    fields.update(over)
    return StepRecord(**fields)


CHECK = b'{"kind":"check"'


def seal(lines: list[bytes], every: int = 10) -> list[bytes]:
    """Header and record lines as the recorder writes them: a Check line after every `every`
    lines (a flush) and a final one (close)."""
    out: list[bytes] = []
    block: list[bytes] = []
    seq = 0

    def flush(final: bool = False) -> None:
        nonlocal seq
        crc = zlib.crc32(b"".join(line + b"\n" for line in block))
        out.extend(block)
        out.append(encode(Check(seq=seq, lines=len(block), crc=crc, final=final)))
        block.clear()
        seq += 1

    for line in lines:
        block.append(line)
        if len(block) == every:
            flush()
    if block:
        flush()
    flush(final=True)
    return out


def reseal(lines: list[bytes]) -> list[bytes]:
    """`lines` with every Check recomputed over the lines before it: what a writer that wrote
    these values would have left (to test the rules on records, not the checksums)."""
    out: list[bytes] = []
    block: list[bytes] = []
    for line in lines:
        if line.startswith(CHECK):
            check = msgspec.json.decode(line, type=Check)
            crc = zlib.crc32(b"".join(x + b"\n" for x in block))
            out.append(encode(msgspec.structs.replace(check, lines=len(block), crc=crc)))
            block = []
        else:
            out.append(line)
            block.append(line)
    return out


def write_lines(path: Path, lines: list[bytes], newline_at_end: bool = True,
                sealed: bool = False) -> None:
    """Write `lines` as they are, or (`sealed`) with Check lines as the recorder adds them."""
    lines = seal(lines) if sealed else lines
    path.write_bytes(b"\n".join(lines) + (b"\n" if newline_at_end else b""))


def synthetic_lines(steps: int = 40) -> list[bytes]:
    lines = [encode(make_header())]
    lines.append(encode(Arrivals(step=0, sim_s=0.0, source="workload", request_ids=["a", "b"],
                                 prompt_tokens=[120, 120], arrival_s=[0.0, 0.0])))
    for i in range(steps):
        if i == 10:
            lines.append(encode(PolicyChanged(step=10, old="off", new="strict", source="tui")))
        lines.append(encode(make_step(i)))
    lines.append(encode(RunFinished(steps=steps, reason="max_steps", sim_s=steps * 0.01,
                                    wall_s=1.0)))
    return lines


def run_cli(*argv: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([PY, "-m", "engine.cli", *argv], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, timeout=120)


def record_run(path: Path, spec: Any, burst_at: dict[int, int] | None = None) -> list[Any]:
    """Run `spec` with a Recorder on `path`; return every item the session emitted."""
    from engine.session import Session

    session = Session(spec)
    items: list[Any] = []
    recorder = Recorder(path, flush_interval_s=0.02,
                        fold=SummaryBuilder)  # many flushes, as in a long run
    session.subscribe(recorder.sink)
    session.subscribe(items.append)
    if burst_at:
        def bursts(item: Any) -> None:
            if isinstance(item, StepRecord) and item.step + 1 in burst_at:
                session.add_burst(burst_at[item.step + 1], source="test")
        session.subscribe(bursts)
    try:
        session.run()
    finally:
        recorder.close()
    return items


@pytest.fixture(scope="module")
def demo_off(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    """A real demo run with policy off, through the abort, recorded as plain JSONL."""
    path = tmp_path_factory.mktemp("rec") / "demo-off.jsonl"
    return path, record_run(path, preset_spec("demo", policy="off"))


# ---- record, summary, verify (real runs) ----------------------------------------------------

def test_recording_holds_exactly_what_the_session_emitted(demo_off: tuple[Path, list[Any]]) -> None:
    path, items = demo_off
    recording = load(path)
    assert recording.all_items() == items
    assert recording.abort is not None and recording.finished is not None
    assert recording.finished.reason == "aborted"
    assert [s.step for s in recording.steps] == list(range(len(recording.steps)))
    assert not recording.truncated


def test_summary_of_recording_equals_run_summary(demo_off: tuple[Path, list[Any]],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli import main
    from engine.analysis.summary import format_summary, summarize, summary_json

    path, items = demo_off
    expected = summarize(items)
    assert expected.aborted and expected.steps > 100
    assert main(["summary", str(path), "--json"]) == 0
    assert capsys.readouterr().out == summary_json(expected) + "\n"
    assert main(["summary", str(path)]) == 0
    assert capsys.readouterr().out == format_summary(expected) + "\n"


def test_observatory_run_summary_equals_summary_of_its_recording(tmp_path: Path) -> None:
    """End to end through the CLI: `run --json` then `summary --json` on its file."""
    out = tmp_path / "run.jsonl.zst"
    ran = run_cli("run", "--preset", "demo", "--policy", "off", "--json", "--record", str(out))
    assert ran.returncode == 3, ran.stderr.decode()[-500:]  # 3: the engine aborted
    summed = run_cli("summary", str(out), "--json")
    assert summed.returncode == 0, summed.stderr.decode()
    assert json.loads(summed.stdout)["aborted"] is True
    assert summed.stdout == ran.stdout


def test_verify_passes_on_a_fresh_recording(demo_off: tuple[Path, list[Any]]) -> None:
    from engine.analysis.verify import verify_file

    path, items = demo_off
    result = verify_file(str(path))
    assert result.ok, result.message
    assert result.steps_checked == sum(isinstance(i, StepRecord) for i in items)


def test_verify_replays_policy_changes_and_bursts(tmp_path: Path) -> None:
    from engine.analysis.verify import verify_file

    path = tmp_path / "toggle-burst.jsonl.zst"
    spec = preset_spec("demo", policy="off", toggles=[(60, "strict")], max_steps=250)
    items = record_run(path, spec, burst_at={30: 8, 120: 5})
    bursts = [i for i in items if isinstance(i, Arrivals) and i.source == "burst"]
    assert [(b.step, len(b.request_ids)) for b in bursts] == [(30, 8), (120, 5)]
    assert any(isinstance(i, PolicyChanged) and i.step == 60 for i in items)
    result = verify_file(str(path))
    assert result.ok, result.message
    assert result.steps_checked == 250

    from engine.analysis.export import perfetto_trace

    instants = [e for e in perfetto_trace(load(path))["traceEvents"] if e["ph"] == "i"]
    policy = [e for e in instants if e["cat"] == "policy"]
    assert [(e["name"], e["args"]["step"]) for e in policy] == [("policy off -> strict", 60)]


def test_verify_checks_what_a_cut_recording_holds(demo_off: tuple[Path, list[Any]],
                                                  tmp_path: Path) -> None:
    """A recording whose writer was killed still verifies, up to where it was cut."""
    from engine.analysis.verify import verify_file

    path, _ = demo_off
    data = path.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) // 2])
    recording = load(cut)
    assert recording.truncated and recording.finished is None and 50 < len(recording) < 200
    result = verify_file(str(cut))
    assert result.ok, result.message
    assert result.steps_checked == len(recording)


def test_verify_names_the_first_changed_step(demo_off: tuple[Path, list[Any]],
                                             tmp_path: Path) -> None:
    path, _ = demo_off
    lines = path.read_bytes().splitlines()
    changed = []
    for line in lines:
        if line.startswith(b'{"kind":"step","step":57,'):
            data = json.loads(line)
            data["swapped"] += 1
            line = json.dumps(data).encode()
        changed.append(line)
    bad = tmp_path / "changed.jsonl"
    write_lines(bad, reseal(changed))  # as if the recorder had written the changed value
    from engine.analysis.verify import verify_file

    result = verify_file(str(bad))
    assert not result.ok
    assert (result.diff_step, result.diff_field) == (57, "swapped")
    assert result.message.startswith("step 57: field swapped differs")

    cli = run_cli("verify", str(bad))
    assert cli.returncode == 1
    assert b"step 57: field swapped differs" in cli.stdout


def test_verify_checks_swapped_blocks_unless_the_file_predates_them(
        demo_off: tuple[Path, list[Any]], tmp_path: Path) -> None:
    """A step's swap_blocks (what the cost model's swap term charges) is a decision like any
    other; a recording written before steps carried it (every value 0 although it swapped) is
    verified on the rest."""
    from engine.analysis.verify import verify_file

    path, items = demo_off
    swapping = next(i.step for i in items if isinstance(i, StepRecord) and i.swap_blocks)

    def rewritten(name: str, change) -> Path:
        lines = []
        for line in path.read_bytes().splitlines():
            if line.startswith(b'{"kind":"step",'):
                data = json.loads(line)
                change(data)
                line = json.dumps(data).encode()
            lines.append(line)
        out = tmp_path / name
        write_lines(out, reseal(lines))
        return out

    def bump(data: dict) -> None:
        if data["step"] == swapping:
            data["swap_blocks"] += 1

    result = verify_file(str(rewritten("bumped.jsonl", bump)))
    assert (result.ok, result.diff_step, result.diff_field) == (False, swapping, "swap_blocks")
    old = rewritten("old.jsonl", lambda data: data.pop("swap_blocks"))
    assert verify_file(str(old)).ok


def test_verify_refuses_what_it_cannot_rerun(tmp_path: Path) -> None:
    """A gpu run re-runs from its recorded requests (engine.analysis.rerun): one made before
    they were kept cannot; nor can a recording switched on mid-run."""
    from engine.analysis.verify import verify_file

    lines = synthetic_lines(5)
    gpu = tmp_path / "gpu.jsonl"
    write_lines(gpu, [encode(make_header(backend="gpu")), *lines[1:]], sealed=True)
    with pytest.raises(ConfigError, match="made before recordings kept each request's"):
        verify_file(str(gpu))
    mid = tmp_path / "mid.jsonl"
    write_lines(mid, [encode(make_header(starts_at_step=5)),
                      *(encode(make_step(i)) for i in range(5, 9)),
                      encode(RunFinished(steps=9, reason="stopped", sim_s=0.1, wall_s=0.1))],
                sealed=True)
    with pytest.raises(ConfigError, match="starts at step 5"):
        verify_file(str(mid))


# ---- damaged files ------------------------------------------------------------------------

def sealed_steps(lines: list[bytes]) -> int:
    """Steps in the blocks of `lines` (a sealed file's lines) that end with a Check line."""
    steps = block = 0
    for line in lines:
        if line.startswith(CHECK):
            steps, block = steps + block, 0
        elif b'"kind":"step"' in line:
            block += 1
    return steps


def test_truncated_last_line_is_tolerated(tmp_path: Path) -> None:
    lines = seal(synthetic_lines(40))
    path = tmp_path / "cut.jsonl"
    cut_at = len(lines) - 3  # step 39's line: cut mid-line, before its block's Check
    path.write_bytes(b"\n".join(lines[:cut_at]) + b"\n" + lines[cut_at][:25])
    recording = load(path)
    assert recording.truncated
    assert len(recording) == sealed_steps(lines[:cut_at]) == 37  # its unsealed block dropped
    assert recording.finished is None
    assert "dropped" in recording.cut_note and "after step 36" in recording.cut_note


@pytest.mark.parametrize("where", ["line end", "check", "before final"])
def test_a_file_cut_on_a_boundary_is_reported_as_cut(tmp_path: Path, where: str) -> None:
    lines = seal(synthetic_lines(40))
    keep = {"line end": len(lines) - 4, "check": len(lines) - 7, "before final": len(lines) - 1}
    path = tmp_path / "cut.jsonl"
    write_lines(path, lines[:keep[where]])
    recording = load(path)
    if where == "before final":  # the end record is sealed: only the closing mark is missing
        assert not recording.truncated and recording.finished is not None
        return
    assert recording.truncated and recording.finished is None
    from engine.stream.reader import notes

    assert any("cut" in note for note in notes(recording))


def test_header_only_file_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "header.jsonl"
    write_lines(path, [encode(make_header())])
    recording = load(path)
    assert recording.truncated and len(recording) == 0
    assert "before the first step" in recording.cut_note


def test_truncated_zstd_frame_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl.zst"
    recorder = Recorder(path, make_header(), fold=SummaryBuilder)
    ends = [path.stat().st_size]  # where each flush ended: after the header's
    for i in range(300):
        recorder.write(make_step(i))
        if i % 100 == 99:
            recorder.flush()  # three flushes of 100 steps
            ends.append(path.stat().st_size)
    recorder.close()
    whole = path.read_bytes()
    assert len(load(path)) == 300
    for cut in (ends[2] + (ends[3] - ends[2]) // 2, ends[2]):  # inside a flush, at its end
        path.write_bytes(whole[:cut])
        recording = load(path)
        assert recording.truncated
        assert len(recording) == 200
        assert [s.step for s in recording.steps] == list(range(len(recording)))


def test_corrupt_middle_line_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    lines = seal(synthetic_lines(40))
    assert b'"step":11,' in lines[15]  # line 16 of the file
    lines[15] = b'{"kind":"step","step":'
    path = tmp_path / "corrupt.jsonl"
    write_lines(path, reseal(lines))  # sealed as written: the line itself is bad
    with pytest.raises(RecordingError) as err:
        load(path)
    message = str(err.value)
    assert message.startswith(f"{path}:16: corrupt line")
    assert "--lenient" in message and "\n" not in message

    recording = load(path, lenient=True)
    assert recording.skipped_lines == 1
    assert len(recording) == 39
    assert recording.step(12).step == 12  # indexing survives the gap
    with pytest.raises(IndexError):
        recording.step(11)

    cli = run_cli("summary", str(path))
    assert cli.returncode == 2
    assert cli.stderr.decode().strip().splitlines() == [f"observatory: error: {message}"]
    lenient = run_cli("summary", str(path), "--lenient", "--json")
    assert lenient.returncode == 0
    assert json.loads(lenient.stdout)["steps"] == 39
    assert b"DAMAGED" in lenient.stderr and b"1 line(s) skipped" in lenient.stderr


def test_a_flipped_byte_in_a_plain_file_is_caught(tmp_path: Path) -> None:
    lines = seal(synthetic_lines(40))
    lines[15] = lines[15].replace(b'"swapped":2', b'"swapped":9')  # step 11; valid JSON
    path = tmp_path / "flipped.jsonl"
    write_lines(path, lines)
    with pytest.raises(RecordingError, match=rf"^{path}:22: lines 12-21 do not match their "
                                             rf"checksum"):
        load(path)
    recording = load(path, lenient=True)
    assert recording.skipped_lines == 11  # the block and its Check line
    assert recording.missing == set(range(8, 17))  # steps 8..16 were in that block


@pytest.mark.parametrize("damage, message", [
    ("duplicate line", "counts 10 line"),
    ("delete line", "counts 10 line"),
    ("swap lines", "do not match their checksum"),
    ("duplicate block", "flush 1 again"),
    ("delete block", "flush(es) 1-1 are missing"),
    ("swap blocks", "flush(es) 1-1 are missing"),
    ("append", "after the recorder's final check"),
])
def test_lines_and_blocks_lost_repeated_or_reordered(tmp_path: Path, damage: str,
                                                     message: str) -> None:
    lines = seal(synthetic_lines(40))
    blocks = [10, 21, 32]  # indices of the first three Check lines
    assert all(lines[i].startswith(CHECK) for i in blocks)
    if damage == "duplicate line":
        lines.insert(15, lines[15])
    elif damage == "delete line":
        del lines[15]
    elif damage == "swap lines":
        lines[15], lines[16] = lines[16], lines[15]
    elif damage == "duplicate block":
        lines[22:22] = lines[11:22]
    elif damage == "delete block":
        del lines[11:22]
    elif damage == "swap blocks":
        lines[11:33] = lines[22:33] + lines[11:22]
    else:
        lines.extend(seal(synthetic_lines(3))[1:])
    path = tmp_path / "damaged.jsonl"
    write_lines(path, lines)
    with pytest.raises(RecordingError, match=re.escape(message)):
        load(path)
    recording = load(path, lenient=True)
    assert recording.problem_count >= 1
    from engine.stream.reader import notes

    assert any("DAMAGED" in note for note in notes(recording))


@pytest.mark.parametrize("change, message", [
    (lambda s: s.replace(b'"step":12,', b'"step":13,'), "steps 12-12 are missing"),
    (lambda s: s.replace(b'"step":12,', b'"step":11,'), "step 11 again or out of order"),
    (lambda s: s.replace(b'"gpu_used":112', b'"gpu_used":1000000000000000000000000000000'),
     "corrupt line"),
    (lambda s: s.replace(b'"gpu_used":112', b'"gpu_used":600'), "600 GPU blocks used of 512"),
    (lambda s: s.replace(b'"generated_tokens":16', b'"generated_tokens":-9223372036854775808'),
     ">= 0"),
    (lambda s: s.replace(b'"generated_tokens":16', b'"generated_tokens":9223372036854775807'),
     "<= "),
    (lambda s: s.replace(b'"sim_s":0.13', b'"sim_s":1e400'), "out of range"),
])
def test_values_no_run_produces_are_refused(tmp_path: Path, change: Any, message: str) -> None:
    """Even when the checksums agree (a buggy writer), the record rules hold."""
    lines = seal(synthetic_lines(40))
    at = next(i for i, line in enumerate(lines) if b'"step":12,' in line)
    lines[at] = change(lines[at])
    path = tmp_path / "values.jsonl"
    write_lines(path, reseal(lines))
    with pytest.raises(RecordingError, match=rf":{at + 1}: .*{re.escape(message)}"):
        load(path)
    summary = run_cli("summary", str(path), "--lenient", "--json")
    assert summary.returncode == 0 and b"DAMAGED" in summary.stderr


def test_end_record_must_agree_with_the_steps(tmp_path: Path) -> None:
    lines = synthetic_lines(40)
    lines[-1] = lines[-1].replace(b'"steps":40', b'"steps":41')
    path = tmp_path / "end.jsonl"
    write_lines(path, lines, sealed=True)
    with pytest.raises(RecordingError, match="end record counts 41 steps"):
        load(path)


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_deep_nesting_is_reported_not_a_recursion_error(tmp_path: Path, depth: int) -> None:
    deep = b"[" * depth + b"]" * depth
    header = encode(make_header()).replace(b'"engine_config":{}', b'"engine_config":' + deep)
    for lines in ([header, *synthetic_lines(3)[1:]],
                  [*synthetic_lines(3)[:2], b'{"kind":"log","x":' + deep + b"}",
                   *synthetic_lines(3)[2:]]):
        path = tmp_path / "deep.jsonl"
        write_lines(path, lines, sealed=True)
        with pytest.raises(RecordingError, match="nested deeper|corrupt"):
            load(path)
        cli = run_cli("summary", str(path), "--lenient")
        assert cli.returncode in (0, 2) and b"Traceback" not in cli.stderr


def test_a_zstd_bomb_is_refused_quickly(tmp_path: Path) -> None:
    import zstandard

    path = tmp_path / "bomb.jsonl.zst"
    compressor = zstandard.ZstdCompressor(level=19).compressobj()
    first = encode(make_header()) + b"\n"
    path.write_bytes(compressor.compress(first + b"\n" * (200 << 20)) + compressor.flush())
    assert path.stat().st_size < 100_000
    started = time.monotonic()
    with pytest.raises(RecordingError, match="1000:1"):
        load(path)
    assert time.monotonic() - started < 5


def test_wrong_type_in_a_line_is_corrupt(tmp_path: Path) -> None:
    lines = synthetic_lines(10)
    lines[5] = lines[5].replace(b'"running":4', b'"running":"four"')
    path = tmp_path / "typed.jsonl"
    write_lines(path, lines, sealed=True)
    with pytest.raises(RecordingError, match=r":6: corrupt line .*running"):
        load(path)


def test_old_schema_1_files_load_but_cannot_be_fully_checked(tmp_path: Path) -> None:
    lines = [encode(make_header(schema=1)), *synthetic_lines(10)[1:]]
    path = tmp_path / "old.jsonl"
    write_lines(path, lines)
    recording = load(path)
    assert recording.unchecked and not recording.truncated and len(recording) == 10
    cli = run_cli("summary", str(path))
    assert cli.returncode == 0 and b"cannot be fully checked" in cli.stderr
    write_lines(path, lines[:-1])  # no end record: cut
    assert load(path).truncated


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    header = msgspec.json.decode(encode(make_header()))
    header["schema"] = SCHEMA_VERSION + 1
    header["spec"] = "a shape this reader does not know"  # must not matter: schema goes first
    path = tmp_path / "future.jsonl"
    write_lines(path, [json.dumps(header).encode(), *synthetic_lines(3)[1:]])
    with pytest.raises(RecordingError, match=rf":1: recording schema {SCHEMA_VERSION + 1} is "
                                             rf"newer .*upgrade"):
        load(path)


@pytest.mark.parametrize("content", [b"hello world\n", b"hello world", b'{"kind":"step"}\n',
                                     b"\x00\x01\x02", b"[1, 2]\n"])
def test_a_file_that_is_not_a_recording_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(RecordingError, match=rf"^{path}:1: not an observatory recording"):
        load(path)


@pytest.mark.parametrize("content,message", [(b"", "empty file"),
                                             (b'{"kind":"header","sch', "header line is cut")])
def test_empty_and_headless_files_are_refused(tmp_path: Path, content: bytes,
                                              message: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    with pytest.raises(RecordingError, match=message):
        load(path)


def test_missing_file_is_a_recording_error_not_a_config_error() -> None:
    with pytest.raises(RecordingError, match="no such file") as caught:
        load("/nonexistent/recording.jsonl.zst")
    assert not isinstance(caught.value, ConfigError)


def test_summary_of_closed_stdin_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([PY, "-m", "engine.cli", "summary", "-"], cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count(b"\n") == 1
    closed = subprocess.run(f"{PY} -m engine.cli summary - <&-", shell=True, cwd=ROOT, env=env,
                            capture_output=True, timeout=60)
    assert closed.returncode == 2 and b"stdin is closed" in closed.stderr, closed.stderr


def test_kill_9_keeps_everything_flushed(tmp_path: Path) -> None:
    """A writer killed mid-run leaves a readable file with all it flushed."""
    path = tmp_path / "killed.jsonl.zst"
    script = f"""
import os, signal, sys, time
sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_recording import make_header, make_step
from engine.stream.recorder import Recorder
rec = Recorder({str(path)!r}, make_header(), fold=None, background_flush=False)
for i in range(200):
    rec.write(make_step(i))
time.sleep(0.6)
rec.write(make_step(200))   # >= flush interval since the last flush: written
for i in range(201, 260):
    rec.write(make_step(i))  # buffered, lost with the process
os.kill(os.getpid(), signal.SIGKILL)
"""
    proc = subprocess.run([PY, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    recording = load(path)
    assert len(recording) == 201  # steps 0..200 were flushed, 201..259 were still buffered
    assert [s.step for s in recording.steps] == list(range(len(recording)))
    assert recording.finished is None and recording.truncated


# ---- the indexed run ----------------------------------------------------------------------

def test_random_access_events_and_series(tmp_path: Path) -> None:
    path = tmp_path / "idx.jsonl.zst"
    recorder = Recorder(path, make_header(), fold=SummaryBuilder)
    for line in synthetic_lines(100)[1:]:
        recorder.write(decode_record(line))
    recorder.close()
    recording = load(path)
    assert recording.step(42).step == 42
    with pytest.raises(IndexError):
        recording.step(100)
    assert recording.next_step_of("swap_out", 3) == 13
    assert recording.next_step_of("swap_out", 2) == 3
    assert recording.prev_step_of("swap_out", 13) == 3
    assert recording.prev_step_of("swap_in", 7) is None
    assert recording.next_step_of("policy", 0) == 10
    assert recording.next_step_of("policy", 10) is None
    assert [c.new for c in recording.records("policy")] == ["strict"]
    cpu = recording.column("cpu_pct")
    assert len(cpu) == 100 and cpu[3] == pytest.approx(100 * 21 / 256)
    assert recording.column("cpu_pct") is cpu  # cached
    with pytest.raises(KeyError):
        recording.column("no_such_series")


def test_recording_append_extends_series() -> None:
    recording = Recording(make_header())
    recording.append(make_step(0))
    assert recording.column("swapped") == [0.0]
    recording.append(make_step(1))
    assert recording.column("swapped") == [0.0, 1.0]


# ---- writer -------------------------------------------------------------------------------

def test_default_recording_path() -> None:
    from datetime import datetime, timezone

    spec = preset_spec("seed-5578", policy="watermark:0.5")
    when = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
    assert default_recording_path(spec, when) == Path(
        "runs/20260304T050607Z-seed-5578-watermark_0.5.jsonl.zst")
    # a trace run is named after its trace, whatever its preset
    traced = preset_spec("seed-5578", policy="reserve", trace="/data/rollout 7.jsonl")
    assert default_recording_path(traced, when) == Path(
        "runs/20260304T050607Z-rollout_7-reserve.jsonl.zst")


def test_default_recording_path_never_overwrites(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import datetime, timezone

    monkeypatch.chdir(tmp_path)
    spec = preset_spec("demo", policy="off")
    when = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
    first = default_recording_path(spec, when)
    Recorder(first, make_header(), fold=SummaryBuilder).close()  # creates runs/
    second = default_recording_path(spec, when)
    assert second != first and second.name == "20260304T050607Z-demo-off-2.jsonl.zst"


def test_recorder_sink_writes_the_header_once_and_close_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "sink.jsonl"
    recorder = Recorder(path, fold=SummaryBuilder)
    header = make_header()
    recorder.sink(header)
    recorder.sink(header)
    recorder.sink(make_step(0))
    recorder.sink(RunFinished(steps=1, reason="completed", sim_s=0.01, wall_s=0.0))
    assert path.read_bytes().count(b'"kind":"header"') == 1  # RunFinished flushed at once
    recorder.close()
    recorder.close()
    assert recorder.records_written == 2
    assert recorder.bytes_written == path.stat().st_size
    assert len(load(path)) == 1


def test_recorder_flushes_while_no_records_arrive(tmp_path: Path) -> None:
    """A paused engine writes nothing; what it wrote before must still reach the disk."""
    path = tmp_path / "paused.jsonl.zst"
    recorder = Recorder(path, make_header(), flush_interval_s=0.3, fold=SummaryBuilder)
    recorder.write(make_step(0))  # buffered: the header's flush was just now
    assert len(load(path)) == 0
    deadline = time.monotonic() + 10
    while len(load(path)) == 0:
        assert time.monotonic() < deadline, "the buffered step never reached the disk"
        time.sleep(0.02)
    assert load(path).step(0) == make_step(0)
    recorder.close()


def test_recorder_to_stdout_is_plain_jsonl(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    recorder = Recorder("-", make_header(), fold=SummaryBuilder)
    recorder.write(make_step(0))
    recorder.close()
    out = capsysbinary.readouterr().out.splitlines()
    # the tally closes the last data block (with the records still buffered at close)
    assert [json.loads(line)["kind"] for line in out] == ["header", "check", "step", "tally",
                                                          "check", "index", "check"]
    assert json.loads(out[-1])["final"] is True


def test_zst_flushes_decode_on_their_own_and_frames_carry_checksums(tmp_path: Path) -> None:
    import zstandard

    path = tmp_path / "frames.jsonl.zst"
    recorder = Recorder(path, make_header(), frame_bytes=3000,
                        fold=SummaryBuilder)  # a frame every ~5 steps
    ends = [path.stat().st_size]
    for i in range(40):
        recorder.write(make_step(i))
        recorder.flush()
        ends.append(path.stat().st_size)
    recorder.close()
    data = path.read_bytes()
    for n, end in enumerate(ends):  # every prefix that ends where a flush ended decodes
        text = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(
            data[:end])
        assert text.count(b"\n") == 2 * (n + 1)  # header, check; then step, check per flush
    frames = 0
    while data:
        assert data[:4] == b"\x28\xb5\x2f\xfd" and data[4] & 0x04  # checksum flag
        obj = zstandard.ZstdDecompressor().decompressobj()
        obj.decompress(data)
        assert obj.eof
        data = obj.unused_data
        frames += 1
    assert frames >= 5
    assert len(load(path)) == 40


# ---- export and compare -------------------------------------------------------------------

def test_perfetto_export_is_valid_json_with_the_expected_tracks(
        demo_off: tuple[Path, list[Any]], tmp_path: Path) -> None:
    path, _ = demo_off
    out = tmp_path / "trace.json"
    cli = run_cli("export", str(path), "--format", "perfetto", "-o", str(out))
    assert cli.returncode == 0, cli.stderr.decode()
    trace = json.loads(out.read_text())
    events = trace["traceEvents"]
    recording = load(path)
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == len(recording)
    assert slices[1]["ts"] == pytest.approx(slices[0]["ts"] + slices[0]["dur"], abs=0.01)
    assert {e["name"] for e in events if e["ph"] == "C"} == {"KV cache %", "queues"}
    instants = {e["name"].split(" ")[0] for e in events if e["ph"] == "i"}
    assert {"swap-out", "engine"} <= instants
    assert {e["name"] for e in events if e["ph"] == "M"} == {"process_name", "thread_name"}


def test_csv_has_one_row_per_step_then_the_aborting_step(demo_off: tuple[Path, list[Any]],
                                                         tmp_path: Path) -> None:
    import csv

    path, _ = demo_off
    out = tmp_path / "steps.csv"
    cli = run_cli("export", str(path), "--format", "csv", "-o", str(out))
    assert cli.returncode == 0, cli.stderr.decode()
    rows = list(csv.DictReader(out.open()))
    recording = load(path)
    *done, aborting = rows
    assert len(done) == len(recording) and {r["aborted"] for r in done} == {"False"}
    assert [int(r["step"]) for r in done] == [s.step for s in recording.steps]
    assert int(done[-1]["swapped"]) == recording.steps[-1].swapped
    # the step vLLM raised in: what it left, no decisions (engine.conventions)
    abort = recording.abort
    assert aborting["aborted"] == "True" and int(aborting["step"]) == abort.step
    assert int(aborting["swapped"]) == abort.swapped and int(aborting["cpu_used"]) == \
        abort.cpu_used
    assert aborting["prefill_tokens"] == aborting["n_swapped_out"] == ""
    assert f"and step {abort.step:,}, where vLLM aborted" in cli.stderr.decode()


def test_compare_metrics_from_hand_made_runs(tmp_path: Path) -> None:
    from engine.analysis.compare import format_table, run_metrics

    recording = Recording(make_header(), str(tmp_path / "a.jsonl"))
    recording.append(Arrivals(step=0, sim_s=0.0, source="workload", request_ids=["a", "b"],
                              prompt_tokens=[10, 10], arrival_s=[0.0, 0.01]))
    recording.append(make_step(0, first_tokens=["a"], generated_tokens=2))  # sim_s 0.01
    recording.append(make_step(1, first_tokens=["b"], generated_tokens=2, withheld=True,
                               swapped=7, cpu_used=128))  # sim_s 0.02
    recording.append(EngineAborted(step=2, message="no swap", error="RuntimeError", sim_s=0.02,
                                   wall_s=0.0, running=1, swapped=9, waiting=0, gpu_used=1,
                                   gpu_total=512, cpu_used=250, cpu_total=256))
    m = run_metrics(recording)
    assert m.abort_step == 2
    assert m.peak_swapped == 9
    assert m.peak_cpu_kv_pct == round(100 * 250 / 256, 2)
    assert m.throughput_tok_s == 200.0  # 4 tokens in 0.02 simulated seconds
    assert m.ttft_mean_s == pytest.approx(0.01)  # a: 0.01 - 0, b: 0.02 - 0.01
    assert m.ttft_p99_s == pytest.approx(0.01)
    assert m.withheld_steps == 1
    table = format_table([m, m])
    assert "abort step" in table and table.count("a.jsonl") == 2


def test_compare_cli_prints_table_and_plot(demo_off: tuple[Path, list[Any]]) -> None:
    path, _ = demo_off
    cli = run_cli("compare", str(path), str(path))
    assert cli.returncode == 0, cli.stderr.decode()
    text = cli.stdout.decode()
    assert "peak CPU KV %" in text and "TTFT p99" in text
    assert "CPU KV-cache usage" in text  # the plot
    assert "\x1b[" not in text  # no colour codes into a pipe
    as_json = json.loads(run_cli("compare", str(path), str(path), "--json").stdout)
    assert len(as_json) == 2 and as_json[0]["abort_step"] == load(path).abort.step
    assert run_cli("compare", str(path)).returncode == 2


# ---- follow -------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst"])
def test_follow_sees_lines_appended_after_it_started(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"live{suffix}"
    recorder = Recorder(path, make_header(), fold=SummaryBuilder)
    recorder.write(make_step(0))
    recorder.flush()
    seen: list[Any] = []
    stop = threading.Event()
    got_first = threading.Event()

    def reader() -> None:
        for item in follow(path, poll_s=0.01, stop=stop):
            seen.append(item)
            if isinstance(item, StepRecord):
                got_first.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    assert got_first.wait(10)
    for i in range(1, 6):
        recorder.write(make_step(i))
    recorder.flush()
    recorder.write(RunFinished(steps=6, reason="completed", sim_s=0.06, wall_s=0.1))
    recorder.close()
    thread.join(10)
    stop.set()
    assert not thread.is_alive()  # follow ends by itself after RunFinished
    assert isinstance(seen[0], Header)
    assert [s.step for s in seen if isinstance(s, StepRecord)] == list(range(6))
    assert isinstance(seen[-1], RunFinished)


def test_follow_stops_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "idle.jsonl"
    Recorder(path, make_header(), fold=SummaryBuilder).flush()
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    items = list(follow(path, poll_s=0.01, stop=stop))
    assert len(items) == 1 and isinstance(items[0], Header)


def test_follow_from_stdin(tmp_path: Path) -> None:
    """The follower hands out each step as it arrives, before stdin has ended."""
    lines = synthetic_lines(20)
    script = ("from engine.stream.reader import follow\n"
              "n = 0\n"
              "for i in follow('-'):\n"
              "    if type(i).__name__ == 'StepRecord':\n"
              "        n += 1\n"
              "        print(n, flush=True)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([PY, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=env)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"\n".join(lines[:10]) + b"\n")
        proc.stdin.flush()
        # the first half's steps come out while stdin is still open (lines[:10] is the
        # header, the arrivals and steps 0-7)
        seen = [proc.stdout.readline().strip() for _ in range(8)]
        assert seen == [str(n).encode() for n in range(1, 9)]
        proc.stdin.write(b"\n".join(lines[10:]) + b"\n")
        proc.stdin.close()
        assert proc.wait(30) == 0
        assert proc.stdout.read().split()[-1] == b"20"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_follow_refuses_a_corrupt_line_unless_lenient(tmp_path: Path) -> None:
    lines = synthetic_lines(5)
    lines[3] = b"garbage"
    path = tmp_path / "bad.jsonl"
    write_lines(path, lines, sealed=True)
    with pytest.raises(RecordingError, match=":4: corrupt line"):
        list(follow(path, poll_s=0.01))
    items = list(follow(path, poll_s=0.01, lenient=True))
    assert sum(isinstance(i, StepRecord) for i in items) == 4


def test_loading_never_imports_vllm() -> None:
    script = ("import sys; import engine.cli; "
              "import engine.stream.reader, engine.analysis.compare, engine.analysis.export, engine.stream.recorder; "
              "print('vllm' in sys.modules, 'torch' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([PY, "-c", script], env=env, capture_output=True, timeout=60)
    assert out.stdout.strip() == b"False False", out.stderr.decode()


def test_a_full_disk_is_reported_within_a_second(tmp_path: Path) -> None:
    """The file system refuses more bytes mid-run (RLIMIT_FSIZE stands in for a full disk):
    the warning reaches stderr within a second of the failed write, while the run goes on,
    and what was written before loads as a cut recording."""
    import resource

    record = tmp_path / "full.jsonl"

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails: EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (1_500_000, 1_500_000))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [PY, "-u", "-m", "engine.cli", "run", "--preset", "demo", "--policy", "strict",
         "--requests", "4000", "--record", str(record)], cwd=tmp_path, env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=small_files)
    warned_at = None
    steps_after = 0
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if "recording stopped" in line and warned_at is None:
                warned_at = time.time()
                assert str(record) in line
            elif warned_at is not None and line.startswith("step "):
                steps_after += 1
                if steps_after == 2:  # the run went on without its recording
                    break
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert warned_at is not None and steps_after == 2
    assert "Traceback" not in err
    # The failing write came at most one flush interval after the last one that landed.
    assert warned_at - record.stat().st_mtime < 1.0 + 0.5
    recording = load(record)
    assert recording.truncated and len(recording) > 0


def test_run_recording_to_a_closed_stdout_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(f"{PY} -m engine.cli run --preset demo --record - >&-", shell=True,
                          cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count(b"\n") == 1, proc.stderr
    assert b"stdout" in proc.stderr


def test_a_file_over_the_size_limit_is_refused_before_reading(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    from engine.stream import limits

    path = tmp_path / "big.jsonl"
    write_lines(path, synthetic_lines(40), sealed=True)
    monkeypatch.setattr(limits, "MAX_RECORDING_BYTES", path.stat().st_size - 1)
    with pytest.raises(RecordingError, match="larger than the reader's limit"):
        load(path)
