"""RecordingController: the one owner of the engine process's recording (after dolphie's
ReplayManager, the single owner of a replay file).

Everything that happens to the recording happens here, and nowhere else:

- open: before vLLM loads (`open()`), so a bad --record path fails in milliseconds, and the
  status says where it records from then on;
- write: every record, on the engine thread, as the exact line the stream carries;
- toggle: on or off mid-run, at a step boundary on the engine thread, so the new file's header
  says exactly which step it starts at (`starts_at_step`);
- seal: on RunFinished the file is closed *before* the end record reaches any client (a client
  that has seen the end can rely on the file being complete); `seal()` (a second Ctrl-C, a
  step that hangs) ends the file with the stream's own end after the last step it holds
  (engine.stream.producer.Ending) and drops anything the engine emits later;
- discard: a run that never started leaves no file behind;
- status: RecordingStatus (path, bytes, records, error) is published when recording starts or
  stops and when an error appears; a small thread polls every STATUS_POLL_S so a full disk is
  reported within a second, and growing byte counts go out about once a second.

Who writes the file is the `recorder` factory's choice: engine.stream.recorder.Recorder in this
process (`observatory run/serve`, whose process the observatory owns), or for an attached
engine engine.host.scribe_pipe.open_recorder, whose scribe process writes and seals the file
even when vLLM kills the engine's process.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import msgspec

from engine.errors import ConfigError
from engine.outpath import remove_empty
from engine.spec import RunSpec
from engine.stream.producer import Ending
from engine.stream.protocol import RecordingStatus
from engine.stream.records import (EngineAborted, Header, ObserverError, Record, RunFinished,
                                   encode)

STATUS_POLL_S = 0.25  # a recorder error shows within this plus the recorder's flush interval
STATUS_EVERY_S = 1.0  # growing byte counts are published at most this often
_END_KINDS = (RunFinished, EngineAborted, ObserverError)
Publish = Callable[[RecordingStatus], None]
MakeRecorder = Callable[..., Any]  # (path, header=None) -> a Recorder or what acts as one


def _in_process(path: str, header: Header | None = None) -> Any:
    from engine.analysis.summary import SummaryBuilder
    from engine.stream.recorder import Recorder

    return Recorder(path, header, fold=SummaryBuilder)


class RecordingController:
    """Record to `path` (a file, "-" for stdout, None for no recording until toggled on)."""

    def __init__(self, path: str | None, publish: Publish,
                 recorder: MakeRecorder = _in_process) -> None:
        self._path = path
        self._publish = publish
        self._make = recorder
        self._recorder = None  # engine.stream.recorder.Recorder while recording
        self._lock = threading.Lock()  # the recorder and `_sealed` against seal() from a signal
        self._sealed = False  # the stream got its end record: drop anything later
        self._ending = Ending()  # the last step written: where seal() ends the file
        self._last_status = RecordingStatus(path=None)
        self._status_sent = 0.0
        self.closed: list[RecordingStatus] = []  # each file written, as it was when it closed

    @property
    def recording(self) -> bool:
        return self._recorder is not None

    # ---- open and close ----------------------------------------------------------------
    def open(self) -> None:
        """Open the recording file now (before vLLM loads). Raises ConfigError."""
        if self._path is None or self._recorder is not None:
            return
        try:
            self._recorder = self._make(self._path)
        except OSError as exc:
            raise ConfigError(f"cannot record to {self._path}: {exc.strerror or exc}; give "
                              f"another --record PATH or --no-record") from None
        self._publish_status(force=True)  # where it records, from the start (a client that
        # attaches while vLLM loads said "not recording" for seconds)

    def discard(self) -> None:
        """The run will never start: close the file opened early and remove it (it holds
        nothing). Any thread."""
        self._close(discard_empty=True)

    def close(self) -> None:
        self._close()

    def _close(self, discard_empty: bool = False) -> None:
        with self._lock:
            rec, self._recorder = self._recorder, None
        if rec is None:
            return
        rec.close()
        if discard_empty and not rec.header_written:
            remove_empty(rec.target)  # opened early, but the run never started; never a device
            return
        status = RecordingStatus(path=None, bytes=rec.bytes_written, records=rec.records_written,
                                 error=_error_text(rec), closed=rec.path)
        self.closed.append(status)
        self._send(status)

    # ---- the engine thread -------------------------------------------------------------
    def write(self, item: Header | Record, line: bytes) -> bool:
        """Record `item` (`line` is its encoding). False: the stream is sealed, so the item
        must go nowhere else either. On RunFinished the file is closed before this returns."""
        kind = type(item)
        with self._lock:
            if self._sealed:
                return False
            recorder = self._recorder
            if recorder is not None:
                if kind is Header:
                    recorder.sink(item)  # writes the header (once) and flushes it
                else:
                    recorder.write_line(line, end=isinstance(item, _END_KINDS), item=item)
            self._ending.note(item)
            if kind is RunFinished:
                self._sealed = True
        if recorder is not None:
            if kind is Header:
                self._publish_status(force=True)
            elif recorder.error is not None and self._last_status.error is None:
                self._publish_status(force=True)
        if kind is RunFinished:
            self._close()  # before any client sees the end: the file is complete
        return True

    def toggle(self, target: str | None, step: int, header: Header,
               spec: RunSpec) -> tuple[bool, str]:
        """Recording on ("on", or a path), off ("off"), or the other way round (None), at the
        boundary before `step` (engine thread). `header` is the run's; `spec` names a default
        file. Returns (ok, the one line the command's Ack carries)."""
        recorder = self._recorder
        if recorder is not None and target in (None, "off"):
            self._close()
            return True, (f"recording closed: {recorder.path} ({recorder.records_written:,} "
                          f"records, {recorder.bytes_written:,} bytes)")
        if recorder is not None:
            return True, f"already recording to {recorder.path}"
        if target == "off":
            return True, "not recording"
        from engine.stream.recorder import default_recording_path

        path = target if target not in (None, "on") else str(default_recording_path(spec))
        try:
            new = self._make(path, msgspec.structs.replace(header, starts_at_step=step))
        except OSError as exc:
            return False, f"cannot record to {path}: {exc.strerror or exc}"
        with self._lock:
            self._recorder = new
        self._publish_status(force=True)
        return True, f"recording to {path} from step {step}"

    # ---- giving up on the engine ---------------------------------------------------------
    def seal(self, reason: str) -> None:
        """End the recording now with RunFinished(reason) after the last step it holds, close
        it, and drop anything the engine emits later (any thread)."""
        with self._lock:
            recorder = self._recorder
            if not self._sealed and recorder is not None and recorder.header_written:
                end = self._ending.record(reason)
                recorder.write_line(encode(end) + b"\n", end=True, item=end)
            self._sealed = True
        self._close()

    # ---- status --------------------------------------------------------------------------
    def watch(self, done: threading.Event) -> None:
        """Publish growing byte counts, and a recorder error within STATUS_POLL_S, until
        `done` is set (on a daemon thread)."""
        def poll() -> None:
            while not done.wait(STATUS_POLL_S):
                if self._recorder is not None:
                    self._publish_status()

        threading.Thread(target=poll, name="observatory-rec-status", daemon=True).start()

    def _status(self) -> RecordingStatus:
        rec = self._recorder
        if rec is None:
            return RecordingStatus(path=None)
        return RecordingStatus(path=rec.path, bytes=rec.bytes_written,
                               records=rec.records_written, error=_error_text(rec))

    def _publish_status(self, force: bool = False) -> None:
        status = self._status()
        last = self._last_status
        if status == last:
            return
        now = time.monotonic()
        changed_meaning = status.path != last.path or status.error != last.error
        if force or changed_meaning or now - self._status_sent >= STATUS_EVERY_S:
            self._status_sent = now
            self._send(status)

    def _send(self, status: RecordingStatus) -> None:
        self._last_status = status
        self._publish(status)


def _error_text(recorder) -> str | None:
    error = recorder.error
    return None if error is None else (error.strerror or str(error))
