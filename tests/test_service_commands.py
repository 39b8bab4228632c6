"""Typed commands: one msgspec Struct per command, dispatched by type, from the wire to the
engine. A bad command from a peer is refused with one Ack line and the connection stays; every
command type reaches a real demo engine (vLLM 0.5's scheduler on the sim backend) and shows its
effect in the stream. Also the one exit-status map (engine.exit_status)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import msgspec
import pytest

from engine import exit_status
from engine.errors import (ConfigError, EngineError, ObservatoryError, PeerError,
                           RecordingError)
from engine.exit_status import ExitStatus
from engine.host import EngineHost
from engine.host.router import _CHECKS
from engine.policy import ENGINE_KINDS, POLICY_NAMES, Policy, parse_policy, require_engine_kind
from engine.run_state import OVER_STATES, RunState, state_for_end
from engine.spec import preset_spec
from engine.stream.fanout import Fanout
from engine.stream.protocol import (COMMAND_OPS, COMMAND_TYPES, PROTOCOL_VERSION, Ack, AddBurst,
                                    BadCommand, Closing, Hello, Pause, Resume, SetPace, SetPolicy,
                                    StateChanged, Stop, ToggleRecording, Welcome, command_arg,
                                    decode_client, decode_incoming, encode_line, make_command)
from engine.stream.reader import load
from engine.stream.records import Arrivals, PolicyChanged, RunFinished, StepRecord
from engine.stream.server import serve_connection

ONE_OF_EACH = [SetPolicy(id=1, policy="strict"), Pause(id=2), Resume(id=3),
               AddBurst(id=4, size=5), Stop(id=5), ToggleRecording(id=6, target="on"),
               SetPace(id=7, scale=0.5)]


# ---- the union, without an engine ----------------------------------------------------------

def test_every_command_type_round_trips_and_names_its_op():
    assert {type(c) for c in ONE_OF_EACH} == set(COMMAND_TYPES)
    assert [c.op for c in ONE_OF_EACH] == list(COMMAND_OPS)
    for command in ONE_OF_EACH:
        line = encode_line(command)
        assert decode_client(line) == command
        assert msgspec.json.decode(line)["kind"] == command.op
        assert make_command(command.op, command_arg(command), command.id) == command


def test_the_router_has_exactly_one_check_per_command_type():
    assert set(_CHECKS) == set(COMMAND_TYPES)


def test_the_session_applies_every_command_but_recording_which_is_not_its_own():
    from engine.session import _APPLY, _AtBoundary, _Hold, _Wake

    # ToggleRecording reaches the session as an _AtBoundary call into the RecordingController;
    # SetPace is no step-boundary command (wall clock only): Session.scale_pace applies it at
    # once and queues a _Wake to re-time a paced wait. A hold (engine.host.attention) is the
    # session's own: no client sends it.
    assert set(_APPLY) == set(COMMAND_TYPES) - {ToggleRecording, SetPace} | {_AtBoundary, _Wake,
                                                                             _Hold}


@pytest.mark.parametrize("line, message", [
    (b'{"kind":"fly","id":4}', "unknown command 'fly': use one of policy, pause"),
    (b'{"kind":"policy","id":4,"policy":5}', "bad policy command (Expected `str`, got `int`"),
    (b'{"kind":"policy","id":4}', "missing required field `policy`"),
    (b'{"kind":"burst","id":4,"size":true}', "bad burst command (Expected `int | null`"),
    (b'{"kind":"record","id":4,"target":["a"]}', "record needs on, off"),
])
def test_a_bad_command_line_is_a_bad_command_naming_its_id(line, message):
    with pytest.raises(BadCommand) as caught:
        decode_client(line)
    assert caught.value.id == 4 and message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("line", [b"\x00\xff", b"[1, 2]", b'{"kind":"pause"}',
                                  b'{"kind":"hello","protocol":2}'])
def test_a_line_that_is_no_command_at_all_is_a_decode_error(line):
    with pytest.raises(msgspec.DecodeError):
        decode_client(line)


def test_make_command_refuses_unknown_ops_and_stray_arguments():
    with pytest.raises(BadCommand, match="unknown command 'warp'"):
        make_command("warp")
    with pytest.raises(BadCommand, match="pause takes no argument"):
        make_command("pause", 3)
    with pytest.raises(BadCommand, match="policy needs a policy name"):
        make_command("policy")


# ---- over a real socket, to a host that has not started: refusals are immediate -------------

class Peer:
    """The client end of a socketpair served by serve_connection (as engine.child serves it)."""

    def __init__(self, host: EngineHost, local: bool = False) -> None:
        self.sock, server_end = socket.socketpair()
        self.stream = self.sock.makefile("rb")
        self.fanout = Fanout(host, keep_history=False)
        self.thread = threading.Thread(
            target=serve_connection, args=(server_end, self.fanout),
            kwargs={"token": None, "source": lambda name: f"remote:{name}", "peer": "test",
                    "local": local}, daemon=True)
        self.thread.start()
        self.sock.sendall(encode_line(Hello(protocol=PROTOCOL_VERSION, token="", client="t")))

    def send(self, line: bytes) -> None:
        self.sock.sendall(line if line.endswith(b"\n") else line + b"\n")

    def next_of(self, kind: type):
        """The next message of `kind`, skipping the state lines a new client gets first."""
        while True:
            line = self.stream.readline()
            assert line.endswith(b"\n"), "the connection ended"
            item = decode_incoming(line)
            if isinstance(item, kind) or isinstance(item, Closing):
                return item

    def close(self) -> None:
        self.sock.close()
        self.thread.join(10)


def test_bad_commands_from_a_peer_are_refused_in_one_line_and_the_connection_stays(tmp_path):
    host = EngineHost(preset_spec("demo"), None)  # never started: nothing reaches an engine
    peer = Peer(host)
    try:
        assert isinstance(peer.next_of(Welcome), Welcome)
        bad = [(b'{"kind":"fly","id":11}', "unknown command 'fly'"),
               (b'{"kind":"policy","id":12,"policy":"bogus"}', "unknown policy 'bogus'"),
               (b'{"kind":"policy","id":13,"policy":7}', "bad policy command"),
               (b'{"kind":"burst","id":14,"size":0}', "burst size must be an integer from 1"),
               (b'{"kind":"burst","id":15,"size":"many"}', "bad burst command"),
               (b'{"kind":"pace","id":17,"scale":0}', "pace needs a scale"),
               (b'{"kind":"pace","id":18,"scale":"fast"}', "bad pace command"),
               (encode_line(ToggleRecording(id=16, target=str(tmp_path / "x.jsonl"))),
                "a remote client cannot choose the server's file names")]
        for line, message in bad:
            peer.send(line)
            ack = peer.next_of(Ack)
            assert isinstance(ack, Ack), ack
            expected_id = msgspec.json.decode(line)["id"]
            assert (ack.id, ack.ok, ack.step) == (expected_id, False, None)
            assert message in ack.message and "\n" not in ack.message
        # Garbage still ends the connection, with one Closing line.
        peer.send(b"this is not json")
        closing = peer.next_of(Closing)
        assert isinstance(closing, Closing) and "protocol error" in closing.reason
    finally:
        peer.close()
    assert not (tmp_path / "x.jsonl").exists()


# ---- every command type reaches a real engine ---------------------------------------------

def test_every_command_type_reaches_the_engine_and_shows_in_the_stream(tmp_path):
    host = EngineHost(preset_spec("demo", policy="off", max_steps=400), None)
    items: list = []
    at_step = threading.Event()
    paused = threading.Event()

    def sink(item):
        items.append(item)
        if isinstance(item, StepRecord) and item.step == 10:
            at_step.set()
        if isinstance(item, StateChanged) and item.state is RunState.PAUSED:
            paused.set()

    host.subscribe(sink)
    peer = Peer(host, local=True)
    path = tmp_path / "late.jsonl"
    acks: dict[int, Ack] = {}
    try:
        host.start()
        assert at_step.wait(120)
        for command in (SetPolicy(id=1, policy="watermark:0.5"), AddBurst(id=2, size=3),
                        ToggleRecording(id=3, target=str(path)), Pause(id=4)):
            peer.send(encode_line(command))
            ack = peer.next_of(Ack)
            acks[ack.id] = ack
        assert paused.wait(30)
        for command in (Resume(id=5), Stop(id=6)):
            peer.send(encode_line(command))
            ack = peer.next_of(Ack)
            acks[ack.id] = ack
        assert host.done.wait(60)
    finally:
        peer.close()
    assert sorted(acks) == [1, 2, 3, 4, 5, 6]
    assert all(a.ok and a.step is not None for a in acks.values()), acks
    assert [acks[i].op for i in range(1, 7)] == ["policy", "burst", "record", "pause", "resume",
                                                 "stop"]
    change = next(i for i in items if isinstance(i, PolicyChanged))
    assert (change.new, change.source, change.step) == ("watermark:0.5", "remote:t",
                                                       acks[1].step)
    burst = next(i for i in items if isinstance(i, Arrivals) and i.source == "burst")
    assert len(burst.request_ids) == 3 and burst.step == acks[2].step
    states = [i.state for i in items if isinstance(i, StateChanged)]
    assert states[-4:] == [RunState.PAUSED, RunState.RUNNING, RunState.STOPPING,
                           RunState.STOPPED]
    assert isinstance(items[-1], RunFinished) and items[-1].reason == "stopped"
    recording = load(path)
    assert recording.header.starts_at_step == acks[3].step
    assert recording.finished == items[-1]


# ---- run states ---------------------------------------------------------------------------

def test_run_states_keep_their_wire_spelling():
    assert [s.value for s in RunState] == ["starting", "running", "paused", "stopping",
                                           "finished", "aborted", "stopped", "failed", "stuck"]
    line = encode_line(StateChanged(state=RunState.PAUSED, step=3))
    assert b'"state":"paused"' in line
    assert decode_incoming(line).state is RunState.PAUSED
    assert RunState.RUNNING == "running" and f"{RunState.STOPPED}" == "stopped"
    assert {state_for_end(r) for r in ("completed", "max_steps")} == {RunState.FINISHED}
    assert state_for_end("aborted") is RunState.ABORTED and RunState.ABORTED.over
    assert state_for_end("observer_error") in OVER_STATES and not RunState.PAUSED.over


# ---- policies and engine kinds -------------------------------------------------------------

def test_every_policy_declares_its_engine_kinds():
    assert set(ENGINE_KINDS) == set(POLICY_NAMES)
    assert parse_policy("strict").engine_kinds == ("v0",)
    require_engine_kind(parse_policy("watermark:0.3"), "v0")
    require_engine_kind(Policy("off"), "v1")
    with pytest.raises(ConfigError, match="acts on the v0 engine.*use off"):
        require_engine_kind(Policy("strict"), "v1")


# ---- the exit-status map -------------------------------------------------------------------

def test_every_error_class_maps_to_its_exit_status():
    for cls in (ConfigError, RecordingError, PeerError, EngineError):
        assert issubclass(cls, ObservatoryError)
        assert exit_status.for_error(cls("x")) == ExitStatus.USAGE == 2
    assert not issubclass(RecordingError, ConfigError) and not issubclass(PeerError, ConfigError)
    assert exit_status.for_run_end("aborted") == 3
    assert exit_status.for_run_end("observer_error") == 4
    assert exit_status.for_run_end("completed") == exit_status.for_run_end("max_steps") == 0
    assert exit_status.for_signal(2) == 130 == ExitStatus.INTERRUPTED
    assert exit_status.for_run_end("no_progress") == 5 == ExitStatus.STUCK
    assert state_for_end("no_progress") is RunState.STUCK and RunState.STUCK.over
    assert [int(s) for s in ExitStatus] == [0, 1, 2, 3, 4, 5, 130]


def run_cli(*args: str) -> tuple[int, str]:
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "tui.cli", *args], capture_output=True,
                            text=True, timeout=120, cwd=Path(__file__).resolve().parents[1])
    return result.returncode, result.stderr


@pytest.mark.parametrize("args, message", [
    (["summary", "/nonexistent/run.jsonl"], "no such file"),  # RecordingError
    (["sweep-report", "/nonexistent/sweep"], "no sweep.toml"),  # ConfigError
])
def test_each_error_kind_ends_the_cli_with_its_status_in_one_line(args, message):
    code, stderr = run_cli(*args)
    lines = stderr.strip().splitlines()
    assert code == ExitStatus.USAGE and len(lines) == 1, stderr
    assert lines[0].startswith("observatory: error:") and message in lines[0]


def test_an_unreachable_server_is_a_peer_error_in_one_line():
    from engine.stream.client import connect

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    with pytest.raises(PeerError, match=f"cannot connect to 127.0.0.1:{port}") as caught:
        connect(f"127.0.0.1:{port}", "token")
    assert "\n" not in str(caught.value)
    assert exit_status.for_error(caught.value) == ExitStatus.USAGE
    with pytest.raises(ConfigError, match="bad address"):  # a malformed flag stays a flag error
        connect("nowhere", "token")
