"""The local transport: the engine as a child process of the TUI (engine.child.spawn_local).

Real processes, real vLLM: the child must stop within 2 s of its owner dying (even by kill -9)
with its recording complete, must not mistake a worker thread's exit for its owner's death,
and must capture its own file descriptors so nothing reaches the owner's terminal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from engine.child import spawn_local
from engine.spec import preset_spec
from engine.stream.protocol import Ack, Disconnected, Progress
from engine.stream.reader import load
from engine.stream.records import Header, LogLine, PolicyChanged, RunFinished, StepRecord

ROOT = Path(__file__).resolve().parents[1]

PARENT = """
import sys, threading, time
sys.path.insert(0, {root!r})
from engine.child import spawn_local
from engine.spec import preset_spec

link = spawn_local(preset_spec("demo", policy="strict", requests=4000), {record!r})
told = threading.Event()

def read():
    for item in link.items():
        if type(item).__name__ == "StepRecord" and item.step >= 20 and not told.is_set():
            print(link.pid, flush=True)
            told.set()

threading.Thread(target=read, daemon=True).start()
time.sleep(600)
"""


def gone(pid: int) -> bool:
    """The process has exited (a zombie nobody reaped yet counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_gone(pid: int, timeout: float = 60.0) -> bool:
    """Wait for `pid` to exit; the timeout only bounds a failure (bench/bench_stop.py measures
    how fast it goes: the 2 s target is a figure for a bench, not a test on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return gone(pid)


def test_child_stops_when_its_owner_is_killed_and_its_recording_is_whole(tmp_path):
    record = tmp_path / "child.jsonl.zst"
    script = tmp_path / "parent.py"
    script.write_text(PARENT.format(root=str(ROOT), record=str(record)))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    child_pid = None
    try:
        line = parent.stdout.readline()  # the child's pid, once it has run 20 steps
        assert line.strip().isdigit(), f"the parent did not report its child: {line!r}"
        child_pid = int(line)
        assert not gone(child_pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        assert wait_gone(child_pid), "the child outlived its owner by a minute"
    finally:
        if parent.poll() is None:
            os.kill(parent.pid, signal.SIGKILL)
            parent.wait(10)
        if child_pid is not None and not gone(child_pid):
            os.kill(child_pid, signal.SIGKILL)
    recording = load(record)
    assert not recording.truncated
    assert recording.finished is not None and recording.finished.reason == "stopped"
    assert len(recording.steps) >= 20
    assert recording.finished.steps == recording.steps[-1].step + 1


def test_child_survives_the_spawning_thread_captures_fd2_and_takes_commands(tmp_path):
    """Spawned from a short-lived worker thread (as a TUI does): PR_SET_PDEATHSIG fires when
    that thread ends, and the child must not take it for its owner's death."""
    record = tmp_path / "child.jsonl.zst"
    links = []
    spawner = threading.Thread(target=lambda: links.append(spawn_local(
        preset_spec("demo", policy="off"), str(record),
        child_args=["--probe-fd2", "written to fd 2 by os.write"])))
    spawner.start()
    spawner.join()
    link = links[0]
    items = []
    try:
        for item in link.items():
            items.append(item)
            if isinstance(item, StepRecord) and item.step == 30:
                command_id = link.send("policy", "strict")
    finally:
        link.close()
    assert isinstance(items[-1], RunFinished), items[-1]
    assert items[-1].reason == "completed"  # strict from step 31 on: no abort
    assert gone(link.pid)
    stages = [i.stage for i in items if isinstance(i, Progress)]
    assert stages[0] == "importing vLLM" and stages[-1] == "first step"
    probe = [i for i in items if isinstance(i, LogLine) and "written to fd 2" in i.message]
    assert [(p.logger, p.level) for p in probe] == [("stderr", "WARNING")]
    change = next(i for i in items if isinstance(i, PolicyChanged))
    ack = next(i for i in items if isinstance(i, Ack))
    assert (change.new, change.source) == ("strict", "tui")
    assert (ack.id, ack.ok, ack.step) == (command_id, True, change.step)
    recording = load(record)
    header = next(i for i in items if isinstance(i, Header))
    assert recording.header == header
    assert recording.items == [i for i in items[items.index(header) + 1:]
                               if type(i).__module__ == "engine.stream.records"]


def test_close_stops_the_child_and_it_finishes_its_recording(tmp_path):
    record = tmp_path / "child.jsonl.zst"
    link = spawn_local(preset_spec("demo", policy="strict", requests=4000), str(record))
    for item in link.items():
        if isinstance(item, StepRecord) and item.step == 10:
            break
    link.close(timeout=0.0)  # returns at once; the child stops and is reaped on its own
    assert wait_gone(link.pid), "the child did not stop after close()"
    recording = load(record)
    assert recording.finished is not None and recording.finished.reason == "stopped"


def test_a_child_that_cannot_start_says_why(tmp_path):
    link = spawn_local(preset_spec("demo", model=str(tmp_path / "no-such-model")), None)
    items = list(link.items())
    link.close()
    assert len([i for i in items if isinstance(i, Disconnected)]) == 1
    assert isinstance(items[-1], Disconnected)
    assert "no-such-model" in items[-1].reason and "neither a packaged one" in items[-1].reason
