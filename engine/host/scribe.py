"""The scribe: a small process that owns one attached engine's recording file.

Why a process of its own: vLLM V1 runs its EngineCore in a process that it terminates at
shutdown and force-kills after a timeout (0.18.0 without the scheduler's shutdown; `vllm serve`
on Ctrl-C; `--shutdown-timeout 0`). A killed process cannot end its zstd frame or write the
index, so a recording written from inside it ended "cut inside its last zstd frame". The
engine's side (engine.host.scribe_pipe) therefore only sends each record's line, already
encoded, down a socket; this process feeds them to the real Recorder. The socket reaches EOF
however the engine's process ends (its own close, SystemExit, SIGKILL), and then this process
ends the recording the way `RecordingController.seal()` does (engine.stream.producer.Ending:
the stream's own end record after the last whole step), with reason PROCESS_ENDED when the
engine neither sent its own end record nor closed the recording itself (CLOSE_LINE: a
recording toggled off mid-run), then the index.
A partial line at EOF (the engine died mid-write) is dropped: the file holds every whole record.

Run as `python -m engine.host.scribe --fd N --path PATH [--lock-fd M] [--remove-if-empty]`:
stdin is the record socket, fd N the recording (opened by the engine, so a bad path fails there
at once), fd M an exclusive flock that `observatory exec` waits on (held until this process
exits: the file is sealed by then). stdout carries status lines back (`{"bytes", "records",
"error"}` as JSON, the last with `"final": true`), non-blocking: a status nobody reads is
dropped, never a reason to stall the engine. It runs in its own session (a terminal's Ctrl-C
must not reach it) and ignores SIGINT and SIGTERM: its end is the socket's EOF.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import time

import msgspec

from engine.stream.producer import Ending

# A process-ended recording's end reason: the engine's process ended without closing its
# stream (killed, or exited without the observer's close).
PROCESS_ENDED = "process_ended"
# The engine's own close (recording toggled off, or closed after its end record): the file ends
# as an in-process Recorder's would, with no end record added.
CLOSE_LINE = b"#close\n"
STATUS_EVERY_S = 0.25  # status lines at most this often (the engine's REC count)
READ_BYTES = 1 << 20  # the engine's side widens the socket to this
# After each read the scribe waits this long before it reads again, so the engine's writes
# land in the socket without waking a process for each record: woken per record, the scribe
# took the engine's CPU at every step on a loaded 2-core machine (bench/bench_attach.py: the
# observer's time per step went from about 0.3 ms to 2 ms). Nothing is lost by waiting: what
# is in the socket outlives the engine's process.
DRAIN_S = 0.05


class Scribe:
    """Feed lines from the socket to a Recorder writing to `file`; seal it at EOF."""

    def __init__(self, path: str, file, status_fd: int | None) -> None:  # noqa: ANN001
        from engine.analysis.summary import SummaryBuilder
        from engine.outpath import classify
        from engine.stream.recorder import Recorder

        self.recorder = Recorder(path, opened=(file, classify(path)), fold=SummaryBuilder)
        self._status_fd = status_fd
        self._last_sent: tuple | None = None
        self._pending = b""  # a line not yet whole
        self._ending = Ending()  # the last step, and whether the engine sent RunFinished
        self.closed_by_engine = False  # the engine sent CLOSE_LINE before its EOF

    # ---- lines ----------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """Record every whole line in `data` (what the socket gave, after what was pending)."""
        data = self._pending + data
        end = data.rfind(b"\n")
        if end < 0:
            self._pending = data
            return
        self._pending = data[end + 1:]
        for line in data[:end].split(b"\n"):
            if line:
                self._line(line + b"\n")

    def _line(self, line: bytes) -> None:
        from engine.stream.records import (EngineAborted, Header, ObserverError, RunFinished,
                                           decode_record)

        recorder = self.recorder
        if line == CLOSE_LINE:
            self.closed_by_engine = True
            return
        if not recorder.header_written:
            try:
                header = msgspec.json.decode(line, type=Header)
            except msgspec.MsgspecError:
                return  # a recording must start with its header: nothing before it is kept
            recorder.sink(header)
            return
        try:
            item = decode_record(line)
        except msgspec.MsgspecError:
            recorder.write_line(line)  # kept as sent; the index then carries no summary
            return
        kind = type(item)
        self._ending.note(item)
        recorder.write_line(line, end=kind in (RunFinished, EngineAborted, ObserverError),
                            item=item)

    # ---- the end ----------------------------------------------------------------------
    def seal(self) -> None:
        """EOF: drop a partial line, end the stream if the engine did not, close (index)."""
        from engine.stream.records import encode

        self._pending = b""
        recorder = self.recorder
        if recorder.header_written and not self._ending.ended and not self.closed_by_engine:
            end = self._ending.record(PROCESS_ENDED)
            recorder.write_line(encode(end) + b"\n", end=True, item=end)
        recorder.close()

    # ---- status -----------------------------------------------------------------------
    def report(self, final: bool = False) -> None:
        """A status line if anything changed (always the final one); dropped if the pipe is
        full or nobody reads it."""
        if self._status_fd is None:
            return
        recorder = self.recorder
        error = recorder.error
        now = (recorder.bytes_written, recorder.records_written,
               None if error is None else [error.errno or 0, error.strerror or str(error)])
        if now == self._last_sent and not final:
            return
        self._last_sent = now
        status = {"bytes": now[0], "records": now[1], "error": now[2], "final": final}
        try:
            os.write(self._status_fd, json.dumps(status).encode() + b"\n")
        except BlockingIOError:
            pass
        except OSError:
            self._status_fd = None  # the engine is gone: nobody to tell


def run(args: argparse.Namespace) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # the end is the socket's EOF, nothing else
    # Not the engine's child: vLLM's shutdown force-kills its EngineCore's child processes
    # (0.33: "force killing sub process"), which killed the scribe before it sealed. The
    # process the engine started exits here; this one goes on, adopted by init.
    if os.fork() > 0:
        os._exit(0)
    status_fd = sys.stdout.fileno()
    try:
        os.write(status_fd, json.dumps({"pid": os.getpid()}).encode() + b"\n")
    except OSError:
        pass
    os.set_blocking(status_fd, False)
    file = os.fdopen(args.fd, "wb")
    scribe = Scribe(args.path, file, status_fd)
    source = sys.stdin.fileno()
    while True:
        ready, _, _ = select.select([source], [], [], STATUS_EVERY_S)
        if ready:
            try:
                data = os.read(source, READ_BYTES)
            except OSError:
                data = b""
            if not data:
                break
            scribe.feed(data)
            time.sleep(DRAIN_S)  # let records gather in the pipe (see DRAIN_S)
        scribe.report()
    scribe.seal()
    if args.remove_if_empty and not scribe.recorder.header_written:
        from engine.outpath import classify, remove_empty

        remove_empty(classify(args.path))  # opened for a run that never started: empty
    scribe.report(final=True)
    return 0  # the lock (args.lock_fd) goes with the process: the file is sealed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.host.scribe")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--lock-fd", type=int)
    parser.add_argument("--remove-if-empty", action="store_true")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
