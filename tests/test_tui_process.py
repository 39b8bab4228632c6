"""The live TUI as a real process on a terminal (a pty), with its engine in a child process.

What the split into processes promises: killing the UI, even with SIGKILL, leaves no engine
behind and a recording that is whole, end record included. How fast the engine goes (the 2 s
docs/guides/serve.md states) is measured by bench/bench_stop.py, not asserted here: a loaded
machine may take longer, and that is not a bug.
"""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from engine.stream.reader import load

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 400.0  # the child imports vLLM: minutes on a heavily loaded 2-core machine


def _drain(fd: int, stop: threading.Event) -> None:
    """Read the UI's terminal output so it never blocks on a full pty."""
    while not stop.is_set():
        try:
            if not os.read(fd, 65536):
                return
        except OSError:
            return


def test_kill_9_of_the_tui_takes_the_engine_child_down(tmp_path):
    record = tmp_path / "killed.jsonl"
    master, slave = pty.openpty()
    os.set_blocking(master, True)
    ui = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "live", "--preset", "demo", "--policy", "strict",
         "--requests", "100000", "--record", str(record)],
        cwd=ROOT, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"})
    os.close(slave)
    stop = threading.Event()
    threading.Thread(target=_drain, args=(master, stop), daemon=True).start()
    child = None
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:  # the engine child is up and recording steps
            children = [p for p in psutil.Process(ui.pid).children()
                        if "engine.child" in " ".join(p.cmdline())]
            if children and record.exists() and record.stat().st_size > 20_000:
                child = children[0]
                break
            assert ui.poll() is None, "the UI exited on its own"
            time.sleep(0.1)
        assert child is not None, "the engine child never started recording"
        ui.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        gone = None
        while time.monotonic() - killed < 60.0:  # bounds a failure, not a target
            if not child.is_running() or child.status() == psutil.STATUS_ZOMBIE:
                gone = time.monotonic() - killed
                break
            time.sleep(0.02)
        assert gone is not None, "the engine child outlived the UI by a minute"
    finally:
        stop.set()
        for proc in (ui, child):
            if proc is not None and proc.is_running() if isinstance(proc, psutil.Process) \
                    else proc is not None and proc.poll() is None:
                proc.kill()
        ui.wait(timeout=10)
        os.close(master)
    recording = load(record)
    assert recording.finished is not None, "no end record: the recording was not closed"
    assert not recording.truncated
    assert recording.finished.steps == len(recording.steps)
