"""The engine's side of a scribe (engine.host.scribe): a Recorder that writes nothing itself.

An attached engine's process may be killed (vLLM V1 force-kills its EngineCore at shutdown),
and a killed process cannot seal a recording. So for an attached engine the
RecordingController's recorder is a ScribeRecorder: it opens the file here (a bad path fails
at once, as before), hands it to a scribe process, and from then on sends each record's line
(the bytes the stream already encoded) with one `send` down a Unix socket (a socketpair: the
scribe's stdin is the other end). The scribe writes the file and seals it when the socket
reaches EOF, however this process ends.

Why each detail:
- The socket is close-on-exec (Python's default) and closed in any child this process forks
  (os.register_at_fork), so the scribe sees EOF when this process dies even if vLLM forked
  workers that outlive it; a forked child never writes to the fd number either (it may name
  another file there).
- A socket, not a pipe, because `send(..., MSG_NOSIGNAL)` turns a write to a dead scribe into
  EPIPE without the SIGPIPE a pipe raises: Python ignores SIGPIPE, but a user's program may
  have put its default back (many CLIs do), and then that signal killed the user's process.
- A scribe that died (EPIPE, EBADF) is the observatory's failure: kept in `error` like a full
  disk, which the owner reports once; nothing raises into vLLM.
- Status comes back on a second pipe (bytes in the file, records, the scribe's write error),
  read by a daemon thread, so `REC N kB` is the file's size and a full disk is still said.
- `close()` ends the socket and waits (at most CLOSE_TIMEOUT_S) for the scribe's last status:
  a caller that closes and then reads the file finds it sealed, as with an in-process Recorder.
- Under `observatory exec --record`, OBSERVATORY_SCRIBES_DIR names a directory where each
  scribe holds an flock (taken here before the scribe starts, so there is no window) until the
  file is sealed; exec waits on every lock there after the command exits.
- The scribe is not this process's child (it forks once and the first process exits):
  vLLM's shutdown force-kills its EngineCore's children.
- If no scribe can be started (no interpreter to run), the recording is written in this
  process as before (`open_recorder`).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

from engine.outpath import STDOUT, open_output
from engine.stream.records import Header, Record, encode
from engine.host.scribe import CLOSE_LINE

PIPE_BYTES = 1 << 20  # the socket's send buffer asked for (the kernel caps it at
# net.core.wmem_max, and holds about twice it in data): a scribe the machine's load keeps off
# the CPU for a while does not make the engine wait (a 64 kB pipe did: bench/bench_attach.py's
# observer time went from 0.26 to 1.4 ms a step on a loaded machine)
CLOSE_TIMEOUT_S = 10.0  # a scribe seals within milliseconds; past this exec's lock still waits
SCRIBES_DIR_ENV = "OBSERVATORY_SCRIBES_DIR"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent
_live: "weakref.WeakSet[ScribeRecorder]" = weakref.WeakSet()  # for the fork hook
_counter = [0]


def open_recorder(path: str, header: Header | None = None) -> Any:
    """A ScribeRecorder for `path`, or an in-process Recorder for stdout or when no scribe can
    start. Raises OSError for a path that cannot be written (as Recorder does)."""
    from engine.analysis.summary import SummaryBuilder
    from engine.stream.recorder import Recorder

    if path == "-":
        return Recorder(path, header, fold=SummaryBuilder)
    try:
        return ScribeRecorder(path, header)
    except _NoScribe:
        return Recorder(path, header, fold=SummaryBuilder)


class _NoScribe(Exception):
    """The scribe process could not start."""


class ScribeRecorder:
    """What RecordingController needs of a Recorder (path, target, counts, error,
    header_written, sink, write_line, close), with the writing done by a scribe process."""

    def __init__(self, path: str, header: Header | None = None) -> None:
        self.path = str(path)
        self.bytes_written = 0
        self.records_written = 0
        self.error: OSError | None = None
        self.header_written = False
        self.scribe_pid: int | None = None  # said by the scribe once it runs
        self._closed = False
        self._pid = os.getpid()
        file, self.target = open_output(self.path)  # OSError: a bad path, said at once
        if self.target.kind == STDOUT:  # open_recorder keeps stdout in process
            raise _NoScribe()
        lock_fd = None
        records = scribe_end = None
        status_r = status_w = -1
        try:
            lock_fd = _take_lock(self.path)
            records, scribe_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            _widen(records)
            status_r, status_w = os.pipe()
            command = [sys.executable, "-m", "engine.host.scribe", "--fd", str(file.fileno()),
                       "--path", self.path]
            fds = [file.fileno()]
            if lock_fd is not None:
                command += ["--lock-fd", str(lock_fd)]
                fds.append(lock_fd)
            if self.target.replaceable:
                command.append("--remove-if-empty")
            self._proc = subprocess.Popen(
                command, stdin=scribe_end.fileno(), stdout=status_w,
                stderr=subprocess.DEVNULL, pass_fds=fds, start_new_session=True,
                env=_scribe_env(), cwd="/")
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            if records is not None:
                records.close()
            if status_r >= 0:
                os.close(status_r)
            raise _NoScribe() from exc
        finally:
            file.close()  # the scribe has its own copy
            if scribe_end is not None:
                scribe_end.close()
            for fd in (status_w, lock_fd):
                if fd is not None and fd >= 0:
                    os.close(fd)
        self._records = records
        self._done = threading.Event()
        self.running = threading.Event()  # the scribe said its pid
        _live.add(self)
        threading.Thread(target=self._read_status, args=(status_r,), daemon=True,
                         name="observatory-scribe-status").start()
        if header is not None:
            self.sink(header)

    # ---- the engine thread's side -------------------------------------------------------
    def sink(self, item: Header | Record) -> None:
        """The header (once), then records, as Recorder.sink takes them."""
        if isinstance(item, Header):
            if not self.header_written:
                self.header_written = True
                self._send(encode(item) + b"\n")
            return
        self._send(encode(item) + b"\n")

    def write_line(self, line: bytes, end: bool = False, item: Record | None = None) -> None:
        """One record's encoded line to the scribe (which decodes it for the index, and
        flushes at an end record by itself)."""
        self._send(line)

    def _send(self, data: bytes) -> None:
        if self._closed or self.error is not None or os.getpid() != self._pid:
            return
        try:
            written = self._records.send(data, socket.MSG_NOSIGNAL)
            while written < len(data):  # a signal cut a large write short: send the rest
                written += self._records.send(data[written:], socket.MSG_NOSIGNAL)
        except OSError as exc:
            self.error = _scribe_error(exc)

    # ---- anyone's side ------------------------------------------------------------------
    def close(self) -> None:
        """EOF to the scribe; wait for it to seal the file (at most CLOSE_TIMEOUT_S)."""
        if self._closed:
            return
        if os.getpid() != self._pid:
            self._closed = True
            return
        self._send(CLOSE_LINE)  # closed on purpose: no end record is added
        self._closed = True
        self._records.close()
        self._done.wait(CLOSE_TIMEOUT_S)
        try:
            self._proc.wait(timeout=0.5 if self._done.is_set() else 0.01)
        except subprocess.TimeoutExpired:
            pass  # still sealing: it finishes on its own (exec waits on its lock)

    def _read_status(self, fd: int) -> None:
        """The scribe's status lines, until it exits."""
        final = False
        try:
            with os.fdopen(fd, "rb") as stream:
                for line in stream:
                    try:
                        status = json.loads(line)
                        if "pid" in status:  # the scribe's own (not the process started)
                            self.scribe_pid = int(status["pid"])
                            self.running.set()
                            continue
                        self.bytes_written = int(status["bytes"])
                        self.records_written = int(status["records"])
                        error = status.get("error")
                    except (ValueError, KeyError, TypeError):
                        continue
                    if error is not None and self.error is None:
                        self.error = OSError(int(error[0]), str(error[1]))
                    final = final or bool(status.get("final"))
        except (OSError, ValueError):
            pass
        if not final and not self._closed and self.error is None:
            self.error = _scribe_error(OSError(errno.EPIPE, "ended"))
        self._done.set()
        self.running.set()

    def _forked(self) -> None:
        """In a child this process forked: the socket is the parent's, never this child's."""
        self._closed = True
        self._records.close()


def _widen(sock: socket.socket) -> None:
    """As much room in the socket as the system allows, up to PIPE_BYTES (never an error)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, PIPE_BYTES)
    except OSError:
        pass


def _scribe_error(exc: OSError) -> OSError:
    """The scribe is gone: say so (not errno's "Broken pipe")."""
    return OSError(exc.errno or errno.EPIPE,
                   f"the recording's writer process ended ({exc.strerror or exc})")


def _take_lock(path: str) -> int | None:
    """Under `observatory exec`: a lock file in its scribes directory, locked now (before the
    scribe starts) and handed to the scribe, which holds it until the file is sealed."""
    directory = os.environ.get(SCRIBES_DIR_ENV)
    if not directory:
        return None
    _counter[0] += 1
    name = os.path.join(directory, f"{os.getpid()}-{_counter[0]}.lock")
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, os.fsencode(path))  # what exec names if this scribe is stuck
    except OSError:
        os.close(fd)
        raise
    return fd


def _scribe_env() -> dict[str, str]:
    """The user's environment without exec's boot directory (the scribe imports no vLLM),
    with this package importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OBSERVATORY_")}
    env["PYTHONPATH"] = str(PACKAGE_ROOT)
    env["OBSERVATORY_EMBEDDED"] = "1"  # `import engine` leaves logging alone
    return env


def _after_fork_in_child() -> None:
    for recorder in list(_live):
        recorder._forked()
    _live.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def wait_sealed(directory: str | os.PathLike[str], timeout_s: float) -> list[str]:
    """Take every scribe's lock in `directory` (each is released once its file is sealed),
    blocking up to `timeout_s` in all. Returns the recordings whose scribe still holds it."""
    import time

    deadline = time.monotonic() + timeout_s
    stuck: list[str] = []
    for lock in sorted(Path(directory).glob("*.lock")):
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        taken = threading.Event()

        def take(fd: int = fd) -> None:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
            except OSError:
                pass
            taken.set()

        threading.Thread(target=take, daemon=True, name="observatory-scribe-wait").start()
        if taken.wait(max(0.0, deadline - time.monotonic())):
            os.close(fd)
        else:  # left to the daemon thread: it holds the fd until the scribe lets go
            try:
                stuck.append(lock.read_text() or str(lock))
            except OSError:
                stuck.append(str(lock))
    return stuck
