"""EngineHost, in this process: the one recorder path, commands with acknowledgements, fault
separation (vLLM's aborts vs the observatory's own errors), recording status. Real demo runs of
vLLM 0.5's engine on the sim backend."""

from __future__ import annotations

import threading
import time

import pytest

from engine.adapters.v0 import hooks as vllm_hooks
from engine.host import EngineHost
from engine.spec import preset_spec
from engine.stream.protocol import Ack, Policies, Progress, RecordingStatus, StateChanged
from engine.stream.reader import load
from engine.stream.records import (EngineAborted, Header, ObserverError, PolicyChanged,
                                   RunFinished, StepRecord)


def run_host(host: EngineHost, timeout: float = 120) -> list:
    items: list = []
    host.subscribe(items.append)
    host.start()
    assert host.done.wait(timeout), "the run did not end"
    return items


def records_only(items: list) -> list:
    return [i for i in items
            if not isinstance(i, (Progress, RecordingStatus, StateChanged, Policies))]


def test_host_records_exactly_what_it_streams(tmp_path):
    path = tmp_path / "run.jsonl.zst"
    host = EngineHost(preset_spec("demo", policy="off"), str(path))
    items = run_host(host)
    stages = [i.stage for i in items if isinstance(i, Progress)]
    assert stages == ["importing vLLM", "building the engine", "building the engine",
                      "making the workload", "adding 48 requests", "first step"]
    assert "512 GPU blocks, 512 CPU blocks" in [i.detail for i in items
                                                if isinstance(i, Progress)][2]
    # Every Progress comes before the Header: the Header means "the first step is next".
    header_at = next(n for n, i in enumerate(items) if isinstance(i, Header))
    assert all(n < header_at for n, i in enumerate(items) if isinstance(i, Progress))
    streamed = records_only(items)
    recording = load(path)
    assert recording.header == streamed[0]
    assert recording.items == streamed[1:]
    assert isinstance(streamed[-2], EngineAborted) and streamed[-1].reason == "aborted"
    closed = [i for i in items if isinstance(i, RecordingStatus) and i.closed]
    assert [c.closed for c in closed] == [str(path)] and closed[0].bytes == path.stat().st_size
    # The recording is closed before the end record reaches anyone.
    assert items.index(closed[0]) < items.index(streamed[-1])


def test_commands_are_acknowledged_after_their_effect_is_in_the_stream(tmp_path):
    host = EngineHost(preset_spec("demo", policy="off"), None)
    acks: list[Ack] = []
    items: list = []

    def sink(item):
        items.append(item)
        if isinstance(item, StepRecord) and item.step == 20:
            host.command("policy", "strict", "test", lambda a: (acks.append(a),
                                                                 items.append(a)), command_id=7)
            host.command("policy", "bogus", "test", acks.append, command_id=8)
            host.command("burst", 3, "test", acks.append, command_id=9)
            host.command("record", "/etc/passwd", "remote:x", acks.append, command_id=10)

    host.subscribe(sink)
    host.start()
    assert host.done.wait(120)
    by_id = {a.id: a for a in acks}
    assert by_id[7].ok and by_id[7].step == 21
    change = next(i for i in items if isinstance(i, PolicyChanged))
    assert (change.step, change.new, change.source) == (21, "strict", "test")
    assert items.index(change) < items.index(by_id[7])  # effect first, then the ack
    assert not by_id[8].ok and "bogus" in by_id[8].message and by_id[8].step is None
    assert by_id[9].ok
    assert not by_id[10].ok and "remote client cannot choose" in by_id[10].message
    # Commands after the end are refused, not lost.
    late: list[Ack] = []
    host.command("pause", None, "test", late.append, command_id=11)
    assert len(late) == 1 and not late[0].ok and "over" in late[0].message


def test_record_on_mid_run_starts_at_the_next_step(tmp_path):
    host = EngineHost(preset_spec("demo", policy="strict", max_steps=120), None)
    path = tmp_path / "late.jsonl"
    acks: list[Ack] = []

    def sink(item):
        if isinstance(item, StepRecord) and item.step == 40:
            host.command("record", str(path), "tui", acks.append, allow_path=True)
        if isinstance(item, StepRecord) and item.step == 90:
            host.command("record", "off", "tui", acks.append)

    host.subscribe(sink)
    run_host(host)
    assert [a.ok for a in acks] == [True, True], acks
    recording = load(path)
    assert recording.header.starts_at_step == 41
    assert recording.steps[0].step == 41 and recording.steps[-1].step == 90
    assert recording.finished is None  # switched off mid-run, before the end


def test_a_failing_subscriber_is_an_observer_error_and_the_stream_still_ends(tmp_path):
    path = tmp_path / "run.jsonl.zst"
    host = EngineHost(preset_spec("demo", policy="strict"), str(path))
    good: list = []

    def bad_sink(item):
        if isinstance(item, StepRecord) and item.step == 30:
            raise KeyError("deliberate")

    host.subscribe(bad_sink)
    host.subscribe(good.append)
    host.start()
    assert host.done.wait(120)
    streamed = records_only(good)
    error = next(i for i in streamed if isinstance(i, ObserverError))
    assert error.where.startswith("sink ") and "bad_sink" in error.where
    assert (error.error, error.step) == ("KeyError", 31)
    assert not any(isinstance(i, EngineAborted) for i in streamed)
    assert streamed[-1] == host.finished and streamed[-1].reason == "observer_error"
    recording = load(path)
    assert recording.items[-2] == error and recording.finished.reason == "observer_error"
    assert [s.step for s in recording.steps] == list(range(31))


@pytest.mark.every_vllm
def test_a_failing_hook_is_an_observer_error_not_an_engine_abort(monkeypatch):
    def broken(scheduler):
        raise ZeroDivisionError("deliberate")

    monkeypatch.setattr(vllm_hooks, "cpu_usage", broken)  # used by the strict gate
    host = EngineHost(preset_spec("demo", policy="strict"), None)
    items = records_only(run_host(host))
    error = next(i for i in items if isinstance(i, ObserverError))
    assert error.where == "hook _schedule_prefills" and error.error == "ZeroDivisionError"
    assert not any(isinstance(i, EngineAborted) for i in items)
    assert isinstance(items[-1], RunFinished) and items[-1].reason == "observer_error"


def test_vllm_raising_stays_an_engine_abort(demo_run):
    items = demo_run("off")
    assert isinstance(items[-2], EngineAborted) and items[-2].error == "RuntimeError"
    assert not any(isinstance(i, ObserverError) for i in items)


def test_a_full_disk_is_reported_while_the_run_goes_on():
    """The error reaches subscribers mid-run (steps follow it), not only at the end. How soon
    after the failed write it comes (the host's STATUS_POLL_S) is bench/bench_stop.py's figure."""
    host = EngineHost(preset_spec("demo", policy="strict", max_steps=200), "/dev/full")
    seen: list[object] = []
    host.subscribe(seen.append)
    host.start()
    assert host.done.wait(120)
    errors = [n for n, i in enumerate(seen) if isinstance(i, RecordingStatus) and i.error]
    assert errors, "no recording error was reported"
    assert "No space left" in seen[errors[0]].error
    assert any(isinstance(i, StepRecord) for i in seen[errors[0]:]), "reported only at the end"
    assert host.finished is not None and host.finished.steps == 200


def test_stop_before_the_engine_is_built_leaves_no_recording(tmp_path):
    path = tmp_path / "never.jsonl.zst"
    host = EngineHost(preset_spec("demo"), str(path))
    host.open_recording()
    assert path.exists()
    assert host.stop("test") is False  # nothing built yet
    host.start()
    assert host.done.wait(120)
    assert host.finished is None and host.start_error == "stopped before the first step"
    assert not path.exists()


def test_pause_then_stop_from_other_threads():
    host = EngineHost(preset_spec("demo", policy="strict"), None)
    states: list[str] = []
    reached = threading.Event()

    def sink(item):
        if isinstance(item, StateChanged):
            states.append(item.state)
        if isinstance(item, StepRecord) and item.step == 5:
            reached.set()

    host.subscribe(sink)
    host.start()
    assert reached.wait(120)
    host.command("pause", None, "test")
    deadline = time.monotonic() + 10
    while host.state != "paused" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert host.state == "paused"
    assert host.stop("test") is True
    assert host.done.wait(30)
    assert host.finished.reason == "stopped"
    assert states[-3:] == ["paused", "stopping", "stopped"]


def test_abandon_seals_the_recording_while_the_engine_still_runs(tmp_path):
    """What a second Ctrl-C does when a step is stuck: the file ends with an end record now,
    and nothing the engine emits afterwards gets into it."""
    path = tmp_path / "run.jsonl"
    host = EngineHost(preset_spec("demo", policy="strict", requests=4000), str(path))
    reached = threading.Event()
    abandoned = threading.Event()
    after: list[int] = []  # steps the engine emitted once the recording was sealed (seen
    # through the session: the host itself hands nothing on after the seal)
    stepped_on = threading.Event()

    def sink(item) -> None:
        if not isinstance(item, StepRecord):
            return
        if item.step == 50:
            reached.set()
        if abandoned.is_set():
            after.append(item.step)
            if len(after) >= 5:
                stepped_on.set()

    host.subscribe(sink)
    host.start()
    assert reached.wait(120)
    host.abandon("interrupted")
    abandoned.set()
    host.session.subscribe(sink)  # the host drops what comes after the seal; the session not
    assert stepped_on.wait(120), "the engine did not go on stepping after abandon"
    host.session.stop()
    host.join(30)
    recording = load(path)
    assert recording.finished.reason == "interrupted"
    assert recording.items[-1] == recording.finished
    assert recording.finished.steps == recording.steps[-1].step + 1
    # nothing the engine emitted after the seal got into the file
    assert recording.steps[-1].step < after[-1]
    assert not set(after[1:]) & {s.step for s in recording.steps}
    assert host.session.state == "stopped"
