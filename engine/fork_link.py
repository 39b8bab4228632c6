"""The owner's side of a fork host (engine.fork_host): a recording re-run in the background,
ready to fork at any step in about a second.

`ForkLink.spawn(path)` starts `python -m engine.fork_host` over a socketpair and returns at
once (the host imports vLLM and builds the engine: seconds). The owner sends `ForkAt(step,
policy, out)`; the host answers `Forked` with the fork's recording path as soon as a process
runs it (the fork then writes its recording as any run does: follow the file), or `Failed`
with one line. `At` says how far the host's re-run has got (for a progress line), `Ready` that
the engine is built.

The messages are newline-delimited JSON, one typed msgspec Struct each. Nothing here imports
vLLM: the replay and live screens use it (tui never imports vLLM).
"""

from __future__ import annotations

import collections
import os
import socket
import subprocess
import threading
from typing import Iterator, Union

import msgspec


class ForkAt(msgspec.Struct, tag="fork", tag_field="kind", frozen=True):
    """Owner -> host: fork the re-run at `step` (the first step `policy` governs), recording
    the fork to `out`."""

    step: int
    policy: str
    out: str


class Ready(msgspec.Struct, tag="ready", tag_field="kind", frozen=True):
    """Host -> owner: the engine is built; a fork can switch before any step up to `last`."""

    last: int


class At(msgspec.Struct, tag="at", tag_field="kind", frozen=True):
    """Host -> owner: the re-run has reached the boundary before `step`."""

    step: int


class Forked(msgspec.Struct, tag="forked", tag_field="kind", frozen=True):
    """Host -> owner: process `pid` runs the fork at `step`, recording to `out`."""

    step: int
    policy: str
    out: str
    pid: int


class Failed(msgspec.Struct, tag="failed", tag_field="kind", frozen=True):
    """Host -> owner: what went wrong, one line (`step`: the fork it was for, or None: the
    host itself, which then exits)."""

    message: str
    step: int | None = None


Message = Union[ForkAt, Ready, At, Forked, Failed]
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Message)


def encode(message: Message) -> bytes:
    return _encoder.encode(message) + b"\n"


def decode(line: bytes) -> Message:
    return _decoder.decode(line)


class LineReader:
    """Whole lines from a socket (blocking, or what is there now)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = b""

    def line(self, block: bool = True) -> bytes | None:
        """The next line; b"" at EOF; None if `block` is False and no whole line is there."""
        while b"\n" not in self._buffer:
            if not block:
                self.sock.setblocking(False)
                try:
                    chunk = self.sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    return None
                finally:
                    self.sock.setblocking(True)
            else:
                chunk = self.sock.recv(65536)
            if not chunk:
                return b""
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line


class ForkLink:
    """A fork host process and the socket to it."""

    def __init__(self, sock: socket.socket, process: subprocess.Popen,
                 diagnostics: collections.deque[str]) -> None:
        self.sock = sock
        self.process = process
        self.diagnostics = diagnostics
        self._reader = LineReader(sock)
        self._lock = threading.Lock()
        self.closed = False

    @classmethod
    def spawn(cls, recording: str) -> "ForkLink":
        """Start a fork host re-running `recording` (EngineError if it cannot start)."""
        from engine.child import start_child

        sock, process, tail = start_child("engine.fork_host",
                                          ["--recording", os.path.abspath(recording)],
                                          hash_seed=True, what="the fork host")
        return cls(sock, process, tail)

    @property
    def pid(self) -> int:
        return self.process.pid

    def fork(self, step: int, policy: str, out: str) -> None:
        self._send(ForkAt(step=step, policy=policy, out=out))

    def _send(self, message: Message) -> None:
        with self._lock:
            self.sock.sendall(encode(message))

    def messages(self) -> Iterator[Message]:
        """The host's messages until it exits (blocking: a reader thread's loop). A host that
        ends without a word says why in a last Failed (its own last stderr line)."""
        while True:
            try:
                line = self._reader.line()
            except OSError:
                line = b""
            if not line:
                if not self.closed:
                    self.process.wait()
                    why = self.diagnostics[-1] if self.diagnostics else \
                        f"exit status {self.process.returncode}"
                    yield Failed(message=f"the fork host ended: {why}")
                return
            try:
                yield decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue

    def close(self) -> None:
        """Let the host go: it is stopped (it holds no recording; its snapshots go with it),
        and a fork it started stops at its next step with its recording sealed."""
        if self.closed:
            return
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        if self.process.poll() is None:
            self.process.terminate()

    def wait_gone(self, grace: float = 5.0) -> int | None:
        """Close and wait for the host process to exit (killed after `grace` seconds)."""
        self.close()
        try:
            return self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
