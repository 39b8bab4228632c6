"""The client side of the engine service: `connect()` for TCP and the `EngineLink` that every
front end reads from (a local child from engine.child.spawn_local, or a remote serve).

EngineLink in one paragraph: `items()` is a blocking iterator meant for a background thread;
it yields the Header, the Records, and the service messages (Ack, Progress, RecordingStatus,
StateChanged) in the order the engine process sent them. It always ends with exactly one of
two items: RunFinished (the run is over; the engine process has closed its recording before
sending it), or Disconnected{reason} (the connection ended first: refused, dropped, the engine
process died, or `close()` was called). It never raises for a network or engine problem.
`send(op, arg)` (or `send(command)` with a typed command) is thread-safe and returns the
command id; the Ack with that id arrives through
`items()`. A command sent on a dead link is lost silently, and `items()` ends with
Disconnected.
"""

from __future__ import annotations

import collections
import os
import socket
import subprocess
import threading
from pathlib import Path
from typing import Iterator

import msgspec

from engine.errors import ConfigError, PeerError
from engine.stream.protocol import (COMMAND_TYPES, PROTOCOL_VERSION, Ack, Closing, Command,
                                    Disconnected, Hello, Progress, RecordingStatus, Refused,
                                    StateChanged, Welcome, decode_incoming, encode_line,
                                    make_command)
from engine.stream.records import Header, Record, RunFinished

CONNECT_TIMEOUT_S = 3.5
"""How long connecting, and then the server's answer to the hello, may take each. A peer that
accepts but never answers (not an observatory) is refused after this long, so a refused
`live --connect` ends, with its reason, within 5 s (bench/bench_connect_refusal.py); a serve
answers in milliseconds, or in up to about 2.5 s while its engine starts on a loaded machine."""
LinkItem = Header | Record | Ack | Progress | RecordingStatus | StateChanged | Disconnected


class EngineLink:
    """One connection to an engine process. See the module docstring for the contract."""

    def __init__(self, sock: socket.socket, *, address: str,
                 process: subprocess.Popen | None = None,
                 diagnostics: collections.deque | None = None,
                 welcome: Welcome | None = None, stream=None) -> None:
        self.address = address
        self.welcome = welcome  # set once the engine process has answered the hello
        self._sock = sock
        self._stream = stream if stream is not None else sock.makefile("rb")
        self._process = process
        self._diagnostics = diagnostics if diagnostics is not None else collections.deque()
        self._send_lock = threading.Lock()
        self._next_id = 0
        self._closed_by_us = False

    @property
    def pid(self) -> int | None:
        """The local engine child's pid; None for a TCP link."""
        return self._process.pid if self._process is not None else None

    # ---- reading ---------------------------------------------------------------------------
    def items(self) -> Iterator[LinkItem]:
        """Blocking; ends after RunFinished or with one Disconnected (see module docstring)."""
        stream = self._stream
        while True:
            try:
                line = stream.readline()
            except (OSError, ValueError):  # ValueError: read on a file close() closed
                line = b""
            if not line.endswith(b"\n"):  # EOF (a cut last line is the peer dying mid-write)
                yield Disconnected(reason=self._eof_reason())
                return
            try:
                item = decode_incoming(line)
            except msgspec.DecodeError as exc:
                self._shutdown()
                yield Disconnected(reason=f"the engine at {self.address} sent a line this "
                                          f"client cannot read ({str(exc)[:120]}); is it the "
                                          f"same observatory version?")
                return
            kind = type(item)
            if kind is Welcome:
                self.welcome = item
                continue
            if kind is Refused or kind is Closing:
                self._shutdown()
                yield Disconnected(reason=item.reason)
                return
            yield item
            if kind is RunFinished:
                return

    def _eof_reason(self) -> str:
        if self._closed_by_us:
            return "closed by this client"
        process = self._process
        if process is None:
            return f"the engine at {self.address} closed the connection"
        try:
            code = process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "the engine process closed the connection"
        last = self._diagnostics[-1] if self._diagnostics else ""
        return (f"the engine process exited with code {code}" + (f": {last}" if last else ""))

    # ---- writing ---------------------------------------------------------------------------
    def send(self, op: str | Command, arg: str | int | None = None) -> int:
        """Send a command, typed (SetPolicy(...), its id is replaced) or as (op, arg) with op
        in COMMAND_OPS; return its id. Raises ValueError (BadCommand) for an unknown op.
        Thread-safe."""
        if isinstance(op, COMMAND_TYPES):
            command = op
        else:
            command = make_command(op, arg)
        with self._send_lock:
            self._next_id += 1
            command_id = self._next_id
            command = msgspec.structs.replace(command, id=command_id)
            try:
                self._sock.sendall(encode_line(command))
            except OSError:
                pass  # the link is down: items() ends with Disconnected
        return command_id

    def close(self, timeout: float = 0.8) -> None:
        """Leave. A local child is asked to stop and waited for up to `timeout` (it finishes
        its recording on its own, and is reaped in the background if it takes longer); a
        remote serve goes on running. Never hangs, never raises."""
        if self._process is not None and self._process.poll() is None:
            self.send("stop")
        self._closed_by_us = True
        self._shutdown()
        process = self._process
        if process is not None:
            try:
                process.wait(timeout=max(0.0, timeout))
            except subprocess.TimeoutExpired:
                threading.Thread(target=process.wait, name="observatory-reap",
                                 daemon=True).start()

    def wait_gone(self, grace: float = 5.0) -> int | None:
        """Close, then wait (by PID) until the local engine process has exited; its exit
        code, or None for a TCP link. A child that is still running after `grace` seconds
        (it was told to stop; it finishes its recording on its own) gets SIGTERM, which also
        stops at a step boundary and closes the recording, and after `grace` more, SIGKILL.
        A restart calls this before it starts the next engine, so two engines (and two
        models' GPU memory) never overlap."""
        self.close(timeout=0.0)
        process = self._process
        if process is None:
            return None
        for last_resort in (process.terminate, process.kill, None):
            try:
                return process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                if last_resort is None:
                    raise
                last_resort()
        return process.wait()

    def _shutdown(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()


def client_token(token_file: str | None) -> str:
    """The shared secret a client sends: the file's contents (--token-file), else
    $OBSERVATORY_TOKEN, else "" (the caller decides whether a server may do without)."""
    if token_file:
        try:
            return Path(token_file).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read --token-file {token_file}: "
                              f"{exc.strerror or exc}") from None
    return os.environ.get("OBSERVATORY_TOKEN", "").strip()


def parse_address(address: str) -> tuple[str, int]:
    """"HOST:PORT" (or "[v6]:PORT") -> (host, port); ConfigError if it is not one."""
    host, sep, port = address.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"bad address {address!r}: use HOST:PORT, e.g. 127.0.0.1:8765")
    return host, int(port)


def connect(address: str, token: str, client: str = "tui", *,
            engine: str | None = None) -> EngineLink:
    """Attach to `observatory serve` at HOST:PORT, or to the engine named `engine`
    (host/pid/index) behind an `observatory exec --serve` hub (None: its newest). Raises
    ConfigError (one line) if the address is malformed, PeerError if it is unreachable or the
    server refuses (wrong token, other protocol version) or answers in something else."""
    host, port = parse_address(address)
    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise PeerError(f"cannot connect to {address}: {why}: is `observatory serve` "
                          f"running there?") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # commands are small lines
    try:
        sock.sendall(encode_line(Hello(protocol=PROTOCOL_VERSION, token=token, client=client,
                                       engine=engine)))
        stream = sock.makefile("rb")
        line = stream.readline()
        answer = decode_incoming(line) if line.endswith(b"\n") else None
    except socket.timeout:
        sock.close()
        raise ConfigError(f"{address} did not answer within {CONNECT_TIMEOUT_S:g} s: is it "
                          f"`observatory serve`?") from None
    except (OSError, msgspec.DecodeError) as exc:
        sock.close()
        raise PeerError(f"{address} did not answer like an observatory engine "
                          f"({str(exc)[:80] or type(exc).__name__})") from None
    if isinstance(answer, Refused):
        sock.close()
        raise PeerError(f"{address} refused the connection: {answer.reason}")
    if not isinstance(answer, Welcome):
        sock.close()
        raise PeerError(f"{address} did not answer like an observatory engine")
    sock.settimeout(None)
    return EngineLink(sock, address=address, welcome=answer, stream=stream)


def list_engines(address: str, token: str) -> list:
    """The engines behind an `observatory exec --serve` hub at HOST:PORT (EngineInfo, oldest
    first). PeerError if it refuses or is not a hub."""
    from engine.stream.protocol import Engines

    host, port = parse_address(address)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S) as sock:
            sock.sendall(encode_line(Hello(protocol=PROTOCOL_VERSION, token=token,
                                           client="list", engine="?")))
            line = sock.makefile("rb").readline()
    except OSError as exc:
        raise PeerError(f"cannot ask {address} for its engines: "
                        f"{exc.strerror or exc or type(exc).__name__}") from None
    try:
        answer = decode_incoming(line)
    except msgspec.DecodeError:
        answer = None
    if isinstance(answer, Refused):
        raise PeerError(f"{address} refused: {answer.reason}")
    if not isinstance(answer, Engines):
        raise PeerError(f"{address} is not an `observatory exec --serve` hub: it did not list "
                        f"engines")
    return list(answer.engines)
