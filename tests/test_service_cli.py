"""`observatory run` and `serve` as processes: signals close the recording with its end record,
and bad serve flags are one line and exit 2."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from engine.stream.reader import load, notes

ROOT = Path(__file__).resolve().parents[1]


def observatory(*args: str, cwd: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "engine.cli", *args], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_run_with_an_end_record(tmp_path, sig):
    """SIGINT, SIGTERM and SIGHUP stop `run` at a step boundary (engine.host): the recording
    has its end record and the recorder's final Check, so it loads as whole, not cut."""
    record = tmp_path / "run.jsonl.zst"
    process = observatory("run", "--preset", "demo", "--policy", "strict", "--requests", "4000",
                          "--record", str(record), cwd=tmp_path)
    try:
        for line in process.stderr:  # progress lines start once the engine steps
            if line.startswith("step "):
                break
        process.send_signal(sig)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert process.returncode == 128 + sig, err
    assert "Traceback" not in err
    recording = load(record)
    assert not recording.truncated and notes(recording) == []
    assert recording.finished is not None and recording.finished.reason == "stopped"
    assert recording.finished.steps == recording.steps[-1].step + 1
    text = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(
        record.read_bytes())
    last = text.splitlines()[-1]
    assert last.startswith(b'{"kind":"check"') and b'"final":true' in last
    assert "end_reason             stopped" in out


@pytest.mark.parametrize("flags, message", [
    (["--listen", "nowhere"], "bad address 'nowhere'"),
    (["--listen", "127.0.0.1:99999"], "bad address"),
    (["--token-file", "EMPTY"], "is empty"),
    (["--record", "-"], "serve records to a file"),
])
def test_bad_serve_flags_are_one_line_and_exit_2(tmp_path, flags, message):
    (tmp_path / "EMPTY").write_text("\n")
    flags = [str(tmp_path / f) if f == "EMPTY" else f for f in flags]
    process = observatory("serve", "--preset", "demo", *flags, cwd=tmp_path)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert err.count("\n") == 1 and message in err, err


def test_serve_refuses_a_busy_port(tmp_path):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        process = observatory("serve", "--preset", "demo", "--no-record", "--listen",
                              f"127.0.0.1:{port}", cwd=tmp_path)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert err.strip().splitlines()[-1].startswith(f"observatory: error: cannot listen on "
                                                   f"127.0.0.1:{port}")
