"""stdin, stdout and stderr that fail in one line: closed, full (`> /dev/full`) or a broken
pipe ends the command with `observatory: error: cannot write to stdout: ...` and exit 2, never
a traceback and never Python's "Exception ignored" at exit.

`guard()` (the CLI calls it before a headless command runs) does three things:
- a standard stream the process was started without (`>&-`, `<&-`) becomes a stub that raises
  OSError on use, and its file descriptor is taken by /dev/null so that no file we open later
  lands on fd 0, 1 or 2 by accident. `summary -` then says "<stdin>: cannot read: stdin is
  closed", and `run --record -` says "cannot record to -: stdout is closed";
- stdout and stderr are wrapped so that a failed write raises OutputError (an OSError, so code
  that already handles OSError, such as the recorder, keeps working), which the CLI reports;
- `finish()` flushes both at the end, where a full disk often shows first.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from typing import Any

from engine.exit_status import ExitStatus

EXIT_OUTPUT = ExitStatus.USAGE  # the command could not do what was asked, nothing crashed


class OutputError(OSError):
    """Writing to stdout or stderr failed; str() is the one line to print."""

    def __str__(self) -> str:
        return self.strerror or "cannot write output"


def _output_error(name: str, exc: BaseException) -> OutputError:
    if isinstance(exc, OSError):
        code, reason = exc.errno or errno.EIO, exc.strerror or str(exc)
    else:  # ValueError: I/O operation on closed file
        code, reason = errno.EBADF, f"{name} is closed"
    return OutputError(code, f"cannot write to {name}: {reason}")


class _Closed(io.TextIOBase):
    """What a standard stream is when the process started without it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def _fail(self, *_: Any) -> Any:
        raise OSError(errno.EBADF, f"{self.name} is closed")

    read = readline = write = fileno = _fail

    @property
    def buffer(self) -> Any:
        self._fail()

    def flush(self) -> None:  # nothing was written, so the exit-time flush has nothing to do
        pass

    def isatty(self) -> bool:
        return False


class _Guarded:
    """A text or binary stream whose write and flush raise OutputError instead of OSError."""

    def __init__(self, stream: Any, name: str) -> None:
        self._stream = stream
        self._name = name
        self._buffer: _Guarded | None = None

    def write(self, data: Any) -> int:
        try:
            return self._stream.write(data)
        except (OSError, ValueError) as exc:
            raise _output_error(self._name, exc) from None

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError) as exc:
            raise _output_error(self._name, exc) from None

    @property
    def buffer(self) -> "_Guarded":
        if self._buffer is None:
            self._buffer = _Guarded(self._stream.buffer, self._name)
        return self._buffer

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno, ...
        return getattr(self._stream, name)


def guard() -> None:
    """Install the stubs and wrappers (idempotent)."""
    stub_missing_streams()
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not isinstance(stream, _Guarded):
            setattr(sys, name, _Guarded(stream, name))


def stub_missing_streams() -> None:
    """Only the stubs for streams the process started without (also for the Textual commands:
    `replay -` with stdin closed is then "cannot read", not an AttributeError)."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is None:
            try:
                taken = os.open(os.devnull, os.O_RDWR)
                if taken != fd:  # the fd was open after all: leave it as it was
                    os.close(taken)
            except OSError:
                pass
            setattr(sys, name, _Closed(name))


def say(line: str) -> None:
    """One line on stderr, if stderr can still take it."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


def fail(exc: OutputError) -> int:
    """Report a failed write in one line and make the interpreter's own final flush quiet."""
    say(f"observatory: error: {exc}")
    silence()
    return EXIT_OUTPUT


def silence() -> None:
    """Point fds 1 and 2 at /dev/null: what is still buffered for them goes nowhere, quietly."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for fd in (1, 2):
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    os.close(null)


def finish(code: int) -> int:
    """Flush stdout and stderr; a write error there still becomes one line and exit 2."""
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except OutputError as exc:
        return fail(exc)
    except (OSError, ValueError):
        silence()
        return code or EXIT_OUTPUT
    return code
