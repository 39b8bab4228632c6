"""`observatory serve` over TCP on 127.0.0.1, with real clients: the handshake (token), remote
commands landing in the server's recording with their source, garbage clients dropped while the
run goes on, several clients at once, and a late attach seeing the whole run.

A serve process is a real vLLM engine on the sim backend. The tests that leave the run going
share one (`serve`); the two that end it (a policy change followed to the end, a late attach
to a finished run) each get their own (`own_serve`), so the tests pass in any order. The
fixtures stop them by PID.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.errors import PeerError
from engine.stream.client import connect
from engine.stream.protocol import (PROTOCOL_VERSION, Ack, Disconnected, Hello, StateChanged,
                                    decode_incoming, encode_line)
from engine.stream.reader import load
from engine.stream.records import Header, PolicyChanged, RunFinished, StepRecord

ROOT = Path(__file__).resolve().parents[1]


class Serve:
    def __init__(self, tmp: Path) -> None:
        self.record = tmp / "served.jsonl.zst"
        self.token_file = tmp / "token"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "engine.cli", "serve", "--preset", "demo", "--policy",
             "strict", "--requests", "4000", "--listen", "127.0.0.1:0", "--token-file",
             str(self.token_file), "--record", str(self.record)],
            cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        self.address: str | None = None
        self._listening = threading.Event()
        threading.Thread(target=self._read_log, daemon=True).start()
        assert self._listening.wait(60), f"serve did not start: {self.log}"
        self.token = self.token_file.read_text().strip()

    def _read_log(self) -> None:
        for line in self.process.stderr:
            self.log.append(line.rstrip("\n"))
            if "listening on " in line:
                self.address = line.rsplit("listening on ", 1)[1].strip()
                self._listening.set()

    def stop(self) -> int:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(60)  # the next step boundary: slow on a loaded machine
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            return self.process.wait(10)


def _served(tmp: Path):
    server = Serve(tmp)
    yield server
    # 0 if the run ended by itself, 143 if SIGTERM stopped it (it ends like SIGINT, 128 + N)
    assert server.stop() in (0, 143), server.log[-5:]


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    """A server whose run the module's tests leave going."""
    yield from _served(tmp_path_factory.mktemp("serve"))


@pytest.fixture
def own_serve(tmp_path):
    """A server of the test's own, whose run the test may end."""
    yield from _served(tmp_path)


def raw_exchange(address: str, data: bytes, timeout: float = 10.0) -> list[bytes]:
    """Send `data` on a fresh connection; return every line received until the server closes."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    return received.splitlines()


def wait_for_step(link, step: int) -> list:
    items = []
    for item in link.items():
        items.append(item)
        if isinstance(item, StepRecord) and item.step >= step:
            return items
        assert not isinstance(item, (RunFinished, Disconnected)), item
    raise AssertionError("the stream ended")


def test_wrong_or_missing_token_is_refused_with_one_line_and_no_record(serve):
    with pytest.raises(PeerError, match="refused the connection: wrong token"):
        connect(serve.address, "not-the-token", client="intruder")
    for hello in (encode_line(Hello(protocol=PROTOCOL_VERSION, token="x" * 32, client="a")),
                  b'{"kind":"hello","protocol":1,"client":"b"}\n'):
        lines = raw_exchange(serve.address, hello)
        assert len(lines) == 1, lines
        refused = decode_incoming(lines[0])
        assert type(refused).__name__ == "Refused"
    lines = raw_exchange(serve.address, encode_line(Hello(protocol=99, token=serve.token,
                                                          client="future")))
    assert len(lines) == 1 and b"protocol version 99" in lines[0]


def test_a_client_sending_garbage_is_dropped_and_the_run_goes_on(serve):
    lines = raw_exchange(serve.address, os.urandom(3000) + b"\n")
    assert len(lines) == 1 and b"not an observatory client" in lines[0]
    # Garbage after a good handshake: the stream so far, one Closing line, then the end.
    hello = encode_line(Hello(protocol=PROTOCOL_VERSION, token=serve.token, client="noisy"))
    lines = raw_exchange(serve.address, hello + b"\x00\xffthis is not json\n")
    received = [decode_incoming(line) for line in lines]
    assert type(received[0]).__name__ == "Welcome"
    assert type(received[-1]).__name__ == "Closing" and "protocol error" in received[-1].reason
    steps = [i.step for i in received if isinstance(i, StepRecord)]
    last_step = max(steps, default=0)
    watcher = connect(serve.address, serve.token, client="watcher")
    try:
        later = wait_for_step(watcher, last_step + 50)  # the engine went on stepping
    finally:
        watcher.close()
    assert any(isinstance(i, StepRecord) and i.step >= last_step + 50 for i in later)
    assert any("dropped client noisy" in line for line in serve.log)


def test_remote_policy_change_reaches_every_client_and_the_recording(own_serve):
    serve = own_serve
    alice = connect(serve.address, serve.token, client="alice")
    bob = connect(serve.address, serve.token, client="bob")
    assert alice.welcome.source == "remote:alice" and alice.pid is None
    bob_items: list = []
    bob_reader = threading.Thread(target=lambda: bob_items.extend(bob.items()), daemon=True)
    bob_reader.start()
    wait_for_step(alice, 1)
    sent = alice.send("policy", "watermark:0.5")
    alice_items = []
    for item in alice.items():
        alice_items.append(item)
        if isinstance(item, Ack) and item.id == sent:
            break
    ack = alice_items[-1]
    change = next(i for i in alice_items if isinstance(i, PolicyChanged))
    assert ack.ok and (change.new, change.source) == ("watermark:0.5", "remote:alice")
    assert ack.step == change.step
    alice.send("stop")
    rest = list(alice.items())
    assert isinstance(rest[-1], RunFinished) and rest[-1].reason == "stopped"
    alice.close()
    bob_reader.join(30)
    bob.close()
    assert change in bob_items  # the other client saw it too
    assert not any(isinstance(i, Ack) for i in bob_items)  # acks go to the sender only
    assert isinstance(bob_items[-1], RunFinished)
    recording = load(serve.record)  # closed before RunFinished reached any client
    assert [(c.new, c.source) for c in recording.policy_changes] == [("watermark:0.5",
                                                                      "remote:alice")]
    assert recording.finished == rest[-1]


def test_a_late_attach_sees_the_whole_run(own_serve):
    serve = own_serve
    finisher = connect(serve.address, serve.token, client="finisher")
    finisher.send("stop")
    assert isinstance(list(finisher.items())[-1], RunFinished)
    finisher.close()
    # The engine thread publishes its "stopped" state just after the end record; a client that
    # attaches in between gets the state before it. Attach again until the state has landed
    # (an event the protocol shows, not a guessed delay).
    deadline = time.monotonic() + 60
    while True:
        late = connect(serve.address, serve.token, client="late")
        items = list(late.items())
        late.close()
        if any(isinstance(i, StateChanged) and i.state == "stopped" for i in items):
            break
        assert time.monotonic() < deadline, "serve never reported its stopped state"
    recording = load(serve.record)
    header = next(i for i in items if isinstance(i, Header))
    records = [i for i in items[items.index(header) + 1:]
               if type(i).__module__ == "engine.stream.records"]
    assert header == recording.header
    assert records == recording.items
    assert any(isinstance(i, StateChanged) and i.state == "stopped" for i in items)
    assert serve.process.poll() is None  # serve keeps serving after its clients left
