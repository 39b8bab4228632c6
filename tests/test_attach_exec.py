"""`observatory exec` on a V0 engine that someone else's script builds (issue #19): the script
runs to its end unchanged, and the recording says what the script saw; a full disk costs one
warning and nothing else; a policy switched from a connected client is in the recording with
its remote source. Real vLLM (the installed V0 release), the sim executor, a real subprocess.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from engine.adapters.versions import installed_version, release_for

_release = release_for(installed_version())
pytestmark = [pytest.mark.skipif(
    _release is None or _release.engine != "v0", reason="needs a V0 vLLM (0.5.0.post1-0.10.2)")]

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "fixtures" / "attach" / "verl_rollout.py"
MODEL = ROOT / "engine" / "adapters" / "models" / "opt-125m"


def _exec(*options: str, pause: bool = False) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "engine.cli", "exec", *options, "--", sys.executable,
               str(SCRIPT), str(MODEL)] + (["--pause"] if pause else [])
    return subprocess.Popen(command, env=env, cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _fans_out() -> bool:
    return _release.family == "v064_0102"


def _result(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, stdout[-2000:]
    return json.loads(lines[0][len("RESULT "):])


def _steps_and_finished(path: Path) -> tuple[list, list[str], list]:
    from engine.stream.reader import load
    from engine.stream.records import PolicyChanged, StepRecord

    items = load(path).all_items()
    steps = [r for r in items if type(r) is StepRecord]
    finished = sorted(rid for r in steps for rid in r.finished)
    changes = [r for r in items if type(r) is PolicyChanged]
    return steps, finished, changes


def test_exec_records_what_a_verl_script_saw(tmp_path):
    proc = _exec("--sim", "--record", str(tmp_path / "runs"))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    seen = _result(out)
    (path,) = list((tmp_path / "runs").glob("*.jsonl.zst"))
    host, pid, index = path.name.removesuffix(".jsonl.zst").rsplit("-", 2)
    assert index == "0" and pid.isdigit()
    steps, finished, _ = _steps_and_finished(path)
    assert len(steps) == seen["steps"] > 0
    from engine.stream.reader import load, open_indexed

    # written by its scribe and sealed before exec returned: whole, with its index
    assert open_indexed(path) is not None and not load(path).truncated
    assert [s.step for s in steps] == list(range(len(steps)))
    # from 0.6.4 an n=8 request runs as 8 groups, and the records name it at each that ends
    assert sorted(set(finished)) == sorted(seen["finished"]) and len(seen["finished"]) == 12
    if not _fans_out():
        assert finished == sorted(seen["finished"])
    assert sum(s.generated_tokens for s in steps) == seen["generated"] == 12 * 8 * 24
    assert "observatory" not in out + err  # nothing to say when nothing went wrong


def test_exec_with_a_full_disk_finishes_with_one_warning():
    proc = _exec("--sim", "--record", "/dev/full")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert len(_result(out)["finished"]) == 12
    warnings = [line for line in (out + err).splitlines() if "observatory:" in line]
    assert len(warnings) == 1, warnings
    assert "No space left on device" in warnings[0] and "WARNING" in warnings[0]


def test_a_policy_switched_from_a_client_is_in_the_recording(tmp_path):
    from engine.stream.client import connect
    from engine.stream.protocol import Ack
    from engine.stream.records import PolicyChanged

    record = tmp_path / "run.jsonl.zst"
    proc = _exec("--sim", "--record", str(record), "--serve", "127.0.0.1:0", pause=True)
    try:
        token = address = None
        for line in proc.stderr:  # exec prints the token, then where it serves
            if line.startswith("observatory exec: token "):
                token = line.split()[-1]
            if line.startswith("observatory exec: serving on "):
                address = line.split()[4].rstrip(";")
                break
        assert token and address
        for line in proc.stdout:  # the first batch is done: the engine is built and announced
            if line.strip() == "READY":
                break
        # from here both pipes are read for as long as the child writes: vLLM's progress bar
        # writes to stderr at every update, and under load a run long enough fills an unread
        # pipe, which stops the script (and so its engine) mid-run
        out_lines, out_reader = _drain(proc.stdout)
        err_lines, err_reader = _drain(proc.stderr)
        _misbehave(address, token)  # garbage, a command that does not apply, a viewer that
        # vanishes mid-stream: none of it reaches the engine
        link = connect(address, token, client="pytest")
        items: queue.Queue = queue.Queue()

        def read() -> None:  # the stream, then how it ended (an exception is an item too)
            try:
                for i in link.items():
                    items.put(i)
                items.put(EOFError("the server closed the stream"))
            except Exception as exc:  # noqa: BLE001
                items.put(exc)

        threading.Thread(target=read, daemon=True).start()
        command_id = link.send("policy", "strict")
        proc.stdin.write("go\n")
        proc.stdin.flush()
        seen_change, kinds = None, []
        while True:
            try:  # a loaded CI machine: the engine's next boundary can be slow to come
                item = items.get(timeout=300)
            except queue.Empty:
                raise AssertionError(f"no stream item in 300 s after {kinds}") from None
            assert not isinstance(item, BaseException), (repr(item), kinds)
            kinds.append(type(item).__name__)
            if type(item) is PolicyChanged:
                seen_change = item
            if type(item) is Ack and item.id == command_id:
                break
        assert item.ok, item.message
        assert seen_change is not None and seen_change.source == "remote:pytest"
        records = [k for k in kinds if k not in ("StateChanged", "RecordingStatus", "Ack")]
        assert records[0] == "Header" and "StepRecord" in records  # the whole stream so far
        link.close()
        proc.stdin.close()
        proc.wait(timeout=300)
        out_reader.join(timeout=60)
        err_reader.join(timeout=60)
        out, err = "".join(out_lines), "".join(err_lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    seen = _result(out)
    steps, finished, changes = _steps_and_finished(record)
    assert len(steps) == seen["steps"] and sorted(set(finished)) == sorted(seen["finished"])
    assert [(c.old, c.new, c.source) for c in changes] == [("off", "strict", "remote:pytest")]
    assert "observatory:" not in out + err  # nothing went wrong on the engine's side
    first = changes[0].step
    assert {s.policy for s in steps[:first]} == {"off"}
    assert {s.policy for s in steps[first:]} == {"strict"}


def _drain(stream) -> tuple[list[str], threading.Thread]:
    """Read `stream` to its end on a thread; its lines land in the list returned."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(stream), daemon=True)
    reader.start()
    return lines, reader


def _misbehave(address: str, token: str) -> None:
    import socket

    from engine.stream.client import connect
    from engine.stream.protocol import Ack

    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:  # not a client
        sock.sendall(b"\x00\xffgarbage\n")
        assert b"refused" in sock.makefile("rb").readline()
    link = connect(address, token, client="rude")
    command_id = link.send("pause")
    for item in link.items():
        if type(item) is Ack and item.id == command_id:
            assert not item.ok and "attached engine" in item.message
            break
    link.close()  # gone mid-stream, without a word


def test_a_bug_in_a_hook_costs_one_warning_and_nothing_else(tmp_path):
    from engine.stream.reader import load
    from engine.stream.records import ObserverError, RunFinished

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = ROOT / "tests" / "fixtures" / "attach" / "hook_bug.py"
    record = tmp_path / "run.jsonl.zst"
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "exec", "--sim", "--record",
                           str(record), "--", sys.executable, str(script), str(MODEL)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(_result(proc.stdout)["finished"]) == 12  # every sample of every request
    warnings = [line for line in (proc.stdout + proc.stderr).splitlines()
                if "observatory:" in line]
    assert len(warnings) == 1 and "injected hook bug" in warnings[0], warnings
    items = load(record).all_items()  # whole and checked up to the failure
    error, end = items[-2:]
    assert type(error) is ObserverError and "ZeroDivisionError" in error.error
    assert type(end) is RunFinished and end.reason == "observer_error"


@pytest.mark.parametrize("args, says", [
    ([], "exec needs a command after --"),
    (["--policy", "nonsense", "--", "true"], "policy"),
    (["--policy", "whole-context", "--", "true"], "whole-context"),
    (["--record", "/proc/no/such/dir", "--", "true"], "--record /proc/no/such/dir"),
    (["--", "/no/such/program"], "cannot run '/no/such/program'"),
])
def test_exec_refuses_bad_input_in_one_line(args, says):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "exec", *args], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("observatory: error:") and says in lines[0], \
        proc.stderr


def test_an_async_engine_script_exits_and_its_recording_is_sealed(tmp_path):
    """Issue #40's hang: on 0.5.0.post1 an AsyncLLMEngine script never exited after
    `asyncio.run(main())` returned (vLLM's wait_for swallowed asyncio.run's cancel: CPython
    gh-86296, vLLM #5654; engine.adapters.v0.exit_cancel hands it back). The program ends with
    its own status, and its recording is whole."""
    script = ROOT / "tests" / "fixtures" / "attach" / "v0_async_rollout.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "exec", "--sim", "--record",
         str(tmp_path / "runs"), "--", sys.executable, str(script), str(MODEL)],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=300)  # a safety net: the bug hangs forever
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail("the AsyncLLMEngine script did not exit: " + err[-2000:])
    assert proc.returncode == 0, err[-3000:]
    seen = _result(out)
    (path,) = list((tmp_path / "runs").glob("*.jsonl.zst"))
    from engine.stream.reader import load
    from engine.stream.records import RunFinished

    recording = load(path)
    assert not recording.truncated
    ends = [r for r in recording.all_items() if type(r) is RunFinished]
    assert [e.reason for e in ends] == ["completed"]
    steps, finished, _ = _steps_and_finished(path)
    assert sorted(set(finished)) == seen["finished"] and len(seen["finished"]) == 8


def test_the_exit_mend_applies_only_where_wait_for_swallows_the_cancel():
    import inspect

    import vllm.engine.async_llm_engine as async_engine

    from engine.adapters.v0 import exit_cancel

    loop_source = inspect.getsource(async_engine.AsyncLLMEngine.run_engine_loop)
    assert exit_cancel.mend() == (sys.version_info < (3, 12)
                                  and "asyncio.wait_for(" in loop_source)
