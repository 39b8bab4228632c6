"""The scribe (engine.host.scribe, engine.host.scribe_pipe): an attached engine's recording is
written by a process of its own, so every exit of the engine's process leaves it whole and
indexed (issue #31 item 5, #30 item 4c). No vLLM: a real writer process sends real records
through a real ScribeRecorder, and ends as a killed EngineCore does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.stream.reader import load, open_indexed
from engine.stream.records import RunFinished, StepRecord

ROOT = Path(__file__).resolve().parent.parent

# A writer: records N steps through a ScribeRecorder (as an attached observer does), says
# "steps N" on stdout once they are sent, then ends as argv[3] says.
WRITER = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, sys.argv[4])
    sys.path.insert(0, os.path.join(sys.argv[4], "tests"))
    from test_recording import make_header, make_step
    from engine.host.recording import RecordingController
    from engine.host.scribe_pipe import open_recorder, ScribeRecorder
    from engine.stream.records import RunFinished, encode

    path, steps, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    controller = RecordingController(path, lambda status: None, open_recorder)
    controller.open()
    assert isinstance(controller._recorder, ScribeRecorder)
    header = make_header()
    controller.write(header, encode(header) + b"\\n")
    for i in range(steps):
        step = make_step(i)
        controller.write(step, encode(step) + b"\\n")
    if how == "partial":  # died inside a write: half a line reaches the socket
        controller._recorder._records.send(encode(make_step(steps))[:40])
    if how == "close":
        end = RunFinished(steps=steps, reason="completed", sim_s=1.0, wall_s=1.0)
        controller.write(end, encode(end) + b"\\n")
    if how == "fork":  # a child that outlives this process must not hold the socket open
        child = os.fork()
        if child == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            signal.pause()
        print(f"child {child}", flush=True)
    print(f"steps {steps} pid {os.getpid()}", flush=True)
    if how in ("kill", "partial", "fork"):
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "exit":
        os._exit(0)  # no atexit, no finalizer: what a killed EngineCore runs
""")


def _write(tmp_path: Path, how: str, steps: int = 300, env: dict | None = None,
           name: str = "run.jsonl.zst") -> tuple[Path, int | None]:
    """The recording, and the pid of a child the writer forked (still running)."""
    path = tmp_path / name
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    proc = subprocess.run([sys.executable, str(script), str(path), str(steps), how, str(ROOT)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})
    assert f"steps {steps}" in proc.stdout, proc.stderr[-2000:]
    child = [int(line.split()[1]) for line in proc.stdout.splitlines()
             if line.startswith("child ")]
    return path, child[0] if child else None


def _sealed(path: Path) -> tuple[list[StepRecord], RunFinished]:
    """Indexed, whole, ending with its end record."""
    indexed = open_indexed(path)
    assert indexed is not None, "the recording has no index"
    recording = load(path)
    assert not recording.truncated
    items = recording.all_items()
    steps = [i for i in items if type(i) is StepRecord]
    assert type(items[-1]) is RunFinished
    return steps, items[-1]


def _wait_for_scribes(directory: Path) -> None:
    """What exec does: take every scribe's lock (each is released once its file is sealed)."""
    from engine.host.scribe_pipe import wait_sealed

    assert wait_sealed(directory, 30.0) == []


@pytest.mark.parametrize("how", ["kill", "exit", "partial", "fork"])
def test_a_killed_writer_leaves_a_sealed_indexed_recording(tmp_path, how):
    locks = tmp_path / "locks"
    locks.mkdir()
    path, child = _write(tmp_path, how, env={"OBSERVATORY_SCRIBES_DIR": str(locks)})
    try:
        (lock,) = locks.glob("*.lock")
        assert lock.read_text() == str(path)  # what exec names if the scribe is stuck
        _wait_for_scribes(locks)  # the forked child still runs: the scribe saw EOF anyway
        steps, end = _sealed(path)
    finally:
        if child is not None:
            os.kill(child, signal.SIGKILL)
    assert [s.step for s in steps] == list(range(300))  # every whole step, nothing half
    assert end.reason == "process_ended" and end.steps == 300
    assert end.sim_s == steps[-1].sim_s


def test_a_closed_stream_keeps_its_own_end(tmp_path):
    path, _ = _write(tmp_path, "close", steps=50)
    steps, end = _sealed(path)  # close() waited for the scribe: sealed on return
    assert len(steps) == 50 and end.reason == "completed"


def test_a_stream_that_never_started_leaves_no_file(tmp_path):
    from engine.host.recording import RecordingController
    from engine.host.scribe_pipe import open_recorder

    path = tmp_path / "never.jsonl.zst"
    controller = RecordingController(str(path), lambda status: None, open_recorder)
    controller.open()
    assert path.exists()  # opened at once: a bad path fails before vLLM loads
    controller.discard()
    assert not path.exists()


def test_byte_counts_and_a_full_disk_come_back_from_the_scribe(tmp_path):
    from engine.host.recording import RecordingController
    from engine.host.scribe_pipe import open_recorder
    from engine.stream.records import encode
    from test_recording import make_header, make_step

    statuses = []
    path = tmp_path / "run.jsonl.zst"
    controller = RecordingController(str(path), statuses.append, open_recorder)
    controller.open()
    header = make_header()
    controller.write(header, encode(header) + b"\n")
    for i in range(200):
        controller.write(make_step(i), encode(make_step(i)) + b"\n")
    controller.close()  # closed on purpose (recording toggled off): no end record added
    closed = controller.closed[-1]
    assert closed.bytes == path.stat().st_size > 0  # REC N kB is the file's size
    assert closed.records == 200 and closed.error is None
    assert not [i for i in load(path).all_items() if type(i) is RunFinished]

    if not os.path.exists("/dev/full"):
        return
    statuses.clear()
    controller = RecordingController("/dev/full", statuses.append, open_recorder)
    controller.open()
    controller.write(header, encode(header) + b"\n")
    controller.close()
    assert controller.closed[-1].error == "No space left on device"
    assert Path("/dev/full").is_char_device()  # written in place, never replaced


def test_a_dead_scribe_is_an_error_never_an_exception(tmp_path):
    from engine.host.scribe_pipe import ScribeRecorder
    from engine.stream.records import encode
    from test_recording import make_header, make_step

    recorder = ScribeRecorder(str(tmp_path / "run.jsonl"), make_header())
    recorder._proc.wait(timeout=30)  # the process started exits at once: the scribe is
    # not the engine's child (vLLM kills an EngineCore's children)
    assert recorder.running.wait(30) and recorder._proc.returncode == 0
    assert recorder.scribe_pid not in (None, recorder._proc.pid)
    os.kill(recorder.scribe_pid, signal.SIGKILL)
    recorder._done.wait(30)  # its status pipe ends with it
    line = encode(make_step(0)) + b"\n"
    for _ in range(3):  # EPIPE: kept, not raised
        recorder.write_line(line)
    assert recorder.error is not None and "writer process ended" in recorder.error.strerror
    recorder.close()


def test_a_writer_that_restored_sigpipe_survives_a_dead_scribe(tmp_path):
    """A user's program may put SIGPIPE back to its default (killing the process), as many a
    CLI does: a write to a scribe that died must then still be an error, never the signal
    (the record channel is a socket written with MSG_NOSIGNAL)."""
    script = textwrap.dedent("""
        import os, select, signal, sys
        sys.path.insert(0, sys.argv[2])
        sys.path.insert(0, os.path.join(sys.argv[2], "tests"))
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as the user's program did
        from test_recording import make_header, make_step
        from engine.host.scribe_pipe import ScribeRecorder
        from engine.stream.records import encode

        recorder = ScribeRecorder(sys.argv[1], make_header())
        # the process started forks the scribe and exits: until it has, it too holds the
        # socket's other end, and a write would still be taken (a loaded machine showed it)
        recorder._proc.wait(timeout=30)
        assert recorder.running.wait(30)
        gone = os.pidfd_open(recorder.scribe_pid)  # readable once it has exited, its files
        os.kill(recorder.scribe_pid, signal.SIGKILL)  # (the socket's end) released
        assert select.select([gone], [], [], 30)[0] and recorder._done.wait(30)
        # what the engine's thread meets when it writes before the status thread has read
        # the end of the scribe's status pipe (and said the scribe is gone)
        recorder.error = None
        for i in range(3):
            recorder.write_line(encode(make_step(i)) + b"\\n")
        recorder.close()
        print("alive:", recorder.error.strerror, flush=True)
    """)
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "run.jsonl"), str(ROOT)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.startswith("alive: the recording's writer process ended"), proc.stdout


def test_rec_grows_with_the_file_while_the_engine_runs(tmp_path):
    """`live --connect` shows the status's bytes as `REC N kB`: mid-run it is what the scribe
    has written to the file, not the size at the header (issue #31: 3 kB of a 458 kB file)."""
    import threading

    from engine.host.recording import RecordingController
    from engine.host.scribe_pipe import open_recorder
    from engine.stream.records import encode
    from test_recording import make_header, make_step

    path = tmp_path / "run.jsonl.zst"
    grown = threading.Event()
    statuses = []

    def publish(status) -> None:  # noqa: ANN001
        statuses.append(status)
        if status.path and status.records >= 2000:
            grown.set()

    controller = RecordingController(str(path), publish, open_recorder)
    controller.open()
    done = threading.Event()
    controller.watch(done)
    header = make_header()
    controller.write(header, encode(header) + b"\n")
    first = statuses[-1].bytes  # published as the header went out
    for i in range(2000):
        controller.write(make_step(i), encode(make_step(i)) + b"\n")
    try:
        assert grown.wait(30), statuses[-3:]
        mid = [s for s in statuses if s.path and s.records >= 2000][0]
        assert first < mid.bytes <= path.stat().st_size
    finally:
        done.set()
        controller.close()
