"""EngineHost: one Session plus the recording it owns, in the process that runs the engine.

Every front end goes through this one path: `observatory run` in-process, `observatory serve`
for TCP clients, and the live TUI's local child (engine.child). The TUI never writes recordings,
so killing it (even with kill -9) cannot leave one without its end record.

Why it looks like this:

- Each record is encoded once, on the engine thread, into the JSON line a recording holds; the
  same bytes go to the recorder and to line listeners (the server's fan-out). The engine thread
  does nothing slower than appending bytes.
- Commands (policy, pause, resume, burst, stop, record) can come from any thread. They go through
  the session's queue and apply at the next step boundary; each gets exactly one Ack, sent after
  its effect is in the stream. Commands sent while vLLM is still being imported wait here.
- Switching recording on mid-run happens on the engine thread at a step boundary, so the new
  file's header says exactly which step it starts at (`starts_at_step`).
- On RunFinished the recording is closed *before* the end record reaches any client: a client
  that has seen the end can rely on the file being complete.
- SIGINT, SIGTERM and SIGHUP all stop at the next step boundary and close the recording with its
  end record. A second signal gives up on the engine (a step may be stuck) but still seals the
  recording with RunFinished(reason="interrupted").
- Recording status (path, bytes, records, error) is published as RecordingStatus; a small
  thread polls the recorder every STATUS_POLL_S so a full disk is reported within a second.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Callable

import msgspec

from engine.errors import ConfigError, one_line
from engine.policy import parse_policy
from engine.spec import RunSpec
from engine.stream.protocol import (COMMAND_OPS, Ack, Progress, RecordingStatus, StateChanged,
                                    encode_line)
from engine.stream.records import (STEP_TYPES, EngineAborted, Header, ObserverError, Record,
                                   RunFinished, StepRecord, encode)

STATUS_POLL_S = 0.25  # a recorder error shows within this plus the recorder's flush interval
STATUS_EVERY_S = 1.0  # growing byte counts are published at most this often

Item = Header | Record | Progress | RecordingStatus | StateChanged
ItemSink = Callable[[Item], None]
LineListener = Callable[[bytes, bool], None]
"""(line, recorded): recorded lines are the recording's own (Header, Records); the others are
service messages (Progress, RecordingStatus, StateChanged) that never go into a recording."""
Reply = Callable[[Ack], None]
_END_KINDS = (RunFinished, EngineAborted, ObserverError)


class EngineHost:
    """Run `spec` and record it to `record` (a path, "-" for stdout, or None for no recording)."""

    def __init__(self, spec: RunSpec, record: str | None, *, freeze_gc: bool = True) -> None:
        self.spec = spec
        self.session = None  # engine.session.Session, once vLLM is imported
        self.recorder = None  # engine.stream.recorder.Recorder while recording
        self.finished: RunFinished | None = None
        # Why the engine could not start, as the one line a user sees: a ConfigError's own
        # message (it already names the fix), or "the engine could not start: <exception>".
        self.start_error: str | None = None
        self.done = threading.Event()  # the run is over (or never started) and recorded
        self.last_progress: Progress | None = None
        self.last_state = StateChanged(state="starting", step=0)
        self.last_recording = RecordingStatus(path=None)
        self._record_path = record
        self._freeze_gc = freeze_gc
        self._item_sinks: list[ItemSink] = []
        self._listeners: list[LineListener] = []
        self._lock = threading.Lock()  # session creation vs stop/commands; recorder writes
        self._early: list[tuple[Callable[[], None], Callable[..., None]]] = []  # (submit, ack)
        # of commands sent before the session existed
        self._cancelled = False
        self._sealed = False  # the recording got its end record: drop anything later
        self._last_step = -1
        self._last_record: StepRecord | None = None  # for an end record written by abandon()
        self._status_sent = 0.0
        self._signals = 0
        self._thread: threading.Thread | None = None
        self.closed_recordings: list[RecordingStatus] = []  # each file this host wrote

    # ------------------------------------------------------------------ wiring
    def subscribe(self, sink: ItemSink) -> None:
        """Typed items: Header, Records, Progress, RecordingStatus, StateChanged. Records
        arrive on the engine thread, service messages on whichever thread made them."""
        self._item_sinks.append(sink)

    def add_listener(self, listener: LineListener) -> None:
        """Encoded lines, in stream order; see LineListener. Must be thread-safe and cheap."""
        self._listeners.append(listener)

    def remove_listener(self, listener: LineListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    @property
    def state(self) -> str:
        return self.last_state.state

    # ------------------------------------------------------------------ lifecycle
    def open_recording(self) -> None:
        """Open the recording file now (before vLLM loads), so a bad path fails in
        milliseconds. Raises ConfigError. Called by start() if not done before."""
        if self._record_path is None or self.recorder is not None:
            return
        from engine.stream.recorder import Recorder

        try:
            self.recorder = Recorder(self._record_path)
        except OSError as exc:
            raise ConfigError(f"cannot record to {self._record_path}: "
                              f"{exc.strerror or exc}; give another --record PATH or "
                              f"--no-record") from None

    def prepare(self) -> None:
        """Import vLLM and build the engine on the calling thread. Raises ConfigError."""
        if self.session is not None:
            return
        self.open_recording()
        self._progress("importing vLLM")
        from engine.session import Session  # imports vLLM and torch: seconds

        session = Session(self.spec, on_progress=self._progress, on_state=self._on_state,
                          freeze_gc=self._freeze_gc)
        session.subscribe(self._on_item)
        session.prepare()
        with self._lock:
            self.session = session
            early, self._early = self._early, []
        for submit, _ in early:
            submit()

    def start(self) -> None:
        """Build and run the engine on its own thread; returns at once. `done` is set when the
        run is over (or could not start: see `start_error`)."""
        self.open_recording()
        self._thread = threading.Thread(target=self._main, name="observatory-engine",
                                         daemon=True)
        self._thread.start()
        threading.Thread(target=self._watch_recorder, name="observatory-rec-status",
                         daemon=True).start()

    def wait(self) -> None:
        """Block until the run is over. Signals are handled meanwhile (see
        install_signal_handlers); a second one seals the recording and returns."""
        try:
            while not self.done.wait(1.0):
                pass
        except KeyboardInterrupt:
            self.abandon("interrupted")

    def join(self, timeout: float | None = None) -> None:
        """Wait for the engine thread itself (after `abandon()`, `done` is set before it ends)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _main(self) -> None:
        try:
            self.prepare()
        except ConfigError as exc:
            return self._fail(str(exc))
        except Exception as exc:  # noqa: BLE001  the engine could not start: say so, once
            return self._fail(f"the engine could not start: {one_line(exc)}")
        with self._lock:
            cancelled = self._cancelled
        if cancelled:
            return self._fail("stopped before the first step", state="stopped")
        try:
            self.session.run()
        finally:
            self.done.set()

    def _fail(self, message: str, state: str = "failed") -> None:
        """The run never started: no recording is left behind, `start_error` says why."""
        with self._lock:
            self.start_error = message
            early, self._early = self._early, []
        for _, ack in early:
            ack(False, f"the engine did not start: {message}")
        self._close_recorder(discard_empty=True)
        self._on_state(state, 0)
        self.done.set()

    def stop(self, reason: str = "") -> bool:
        """Stop at the next step boundary. Returns False if the engine had not been built yet
        (the run will then not start at all). Safe from any thread and from signal handlers
        that run while the main thread only waits."""
        with self._lock:
            session = self.session
            if session is None:
                self._cancelled = True
        if session is None:
            return False
        if not session.over and self.state not in ("stopping",):
            self._on_state("stopping", self._last_step + 1)
        session.stop()
        return True

    def cancel_start(self) -> None:
        """After `stop()` returned False: the run will never start, so remove the recording
        file opened early (it holds nothing). For a process about to exit at once."""
        self._close_recorder(discard_empty=True)

    def abandon(self, reason: str = "interrupted") -> None:
        """Give up on the engine thread (a step may be stuck): seal the recording with an end
        record now and drop anything the engine emits later."""
        with self._lock:
            if self._sealed or self.recorder is None or not self.recorder.header_written:
                self._sealed = True
            else:
                last = self._last_record
                end = RunFinished(steps=self._last_step + 1, reason=reason,
                                  sim_s=last.sim_s if last else 0.0,
                                  wall_s=last.wall_s if last else 0.0)
                self.recorder.write_line(encode(end) + b"\n", end=True)
                self._sealed = True
        self._close_recorder()
        self.done.set()

    def install_signal_handlers(self) -> None:
        """SIGINT, SIGTERM and SIGHUP: stop at the next step boundary; a second one raises
        KeyboardInterrupt in the main thread, which `wait()` turns into `abandon()`."""
        def handler(signum: int, frame) -> None:  # noqa: ANN001
            self._signals += 1
            if self._signals > 1:
                raise KeyboardInterrupt
            self.stop(signal.Signals(signum).name)

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, handler)

    # ------------------------------------------------------------------ commands
    def command(self, op: str, arg: str | int | None, source: str, reply: Reply | None = None,
                *, command_id: int = 0, allow_path: bool = False) -> None:
        """Apply a client command. Exactly one Ack goes to `reply` (possibly at once, on this
        thread, if the command is refused before reaching the engine)."""
        def ack(ok: bool, message: str = "", step: int | None = None) -> None:
            if reply is not None:
                reply(Ack(id=command_id, op=op, ok=ok, message=message, step=step))

        if op not in COMMAND_OPS:
            return ack(False, f"unknown command {op!r}: use one of {', '.join(COMMAND_OPS)}")
        try:
            submit = self._prepare_command(op, arg, source, allow_path, ack)
        except (ConfigError, ValueError, TypeError) as exc:
            return ack(False, str(exc))
        with self._lock:
            if self.session is None and self.start_error is None:
                self._early.append((submit, ack))
                return
        if self.session is None:
            return ack(False, f"the engine did not start: {self.start_error}")
        submit()

    def _prepare_command(self, op: str, arg, source: str, allow_path: bool,
                         ack) -> Callable[[], None]:
        """Validate now, apply later: return the call that hands the command to the session."""
        done = ack  # Session's done(ok, message, step) has Ack's shape
        if op == "policy":
            if not isinstance(arg, str):
                raise ConfigError("policy needs a policy name: off, strict or watermark[:F]")
            policy = parse_policy(arg)
            return lambda: self.session.set_policy(policy, source, done)
        if op == "burst":
            if arg is not None and (isinstance(arg, bool) or not isinstance(arg, int)
                                    or not 1 <= arg <= 100_000):
                raise ConfigError(f"burst size must be an integer from 1 to 100000, got {arg!r}")
            return lambda: self.session.add_burst(arg, source, done)
        if op == "pause":
            return lambda: self.session.pause(done)
        if op == "resume":
            return lambda: self.session.resume(done)
        if op == "stop":
            return lambda: self._stop_command(done)
        # record
        if arg not in (None, "on", "off"):
            if not allow_path:
                raise ConfigError("a remote client cannot choose the server's file names: "
                                  "send record on, off, or nothing to toggle")
            if not isinstance(arg, str) or not arg or arg == "-":
                raise ConfigError(f"record needs on, off or a file path, got {arg!r}")
        return lambda: self.session.at_boundary(
            lambda step: self._toggle_recording(arg, step), done)

    def _stop_command(self, done) -> None:
        if self.session is not None and not self.session.over:
            self._on_state("stopping", self._last_step + 1)
        self.session.stop(done)

    # ------------------------------------------------------------------ the engine thread
    def _on_item(self, item: Header | Record) -> None:
        line = encode(item) + b"\n"
        with self._lock:
            if self._sealed:
                return
            recorder = self.recorder
            if recorder is not None:
                if type(item) is Header:
                    recorder.sink(item)  # writes the header (once) and flushes it
                else:
                    recorder.write_line(line, end=isinstance(item, _END_KINDS))
            if type(item) in STEP_TYPES:
                self._last_step = item.step
                self._last_record = item
            if type(item) is RunFinished:
                self._sealed = True
                self.finished = item
        if recorder is not None:
            if type(item) is Header:
                self._publish_recording(force=True)
            elif recorder.error is not None and self.last_recording.error is None:
                self._publish_recording(force=True)
        if type(item) is RunFinished:
            self._close_recorder()  # before any client sees the end: the file is complete
        self._to_listeners(line, True)
        self._to_sinks(item)
        if type(item) is RunFinished:
            self.done.set()

    def _to_listeners(self, line: bytes, recorded: bool) -> None:
        for listener in list(self._listeners):
            try:
                listener(line, recorded)
            except Exception as exc:  # noqa: BLE001  same rule as for sinks
                self.remove_listener(listener)
                if self.session is not None and not self.session.over:
                    self.session.report_sink_failure(listener, exc)

    def _to_sinks(self, item: Item) -> None:
        """A subscriber that raises is an observatory bug: it is dropped, and (for a record)
        the session ends the run with an ObserverError naming it; the recording and the other
        subscribers carry on to the end record."""
        for sink in list(self._item_sinks):
            try:
                sink(item)
            except Exception as exc:  # noqa: BLE001
                if sink in self._item_sinks:
                    self._item_sinks.remove(sink)
                if self.session is not None and not self.session.over:
                    self.session.report_sink_failure(sink, exc)

    def _toggle_recording(self, arg, step: int) -> tuple[bool, str]:
        """Runs on the engine thread at the boundary before `step`."""
        recorder = self.recorder
        if recorder is not None and arg in (None, "off"):
            self._close_recorder()
            return True, (f"recording closed: {recorder.path} ({recorder.records_written:,} "
                          f"records, {recorder.bytes_written:,} bytes)")
        if recorder is not None:
            return True, f"already recording to {recorder.path}"
        if arg == "off":
            return True, "not recording"
        from engine.stream.recorder import Recorder, default_recording_path

        session = self.session
        path = str(arg) if arg not in (None, "on") else str(default_recording_path(
            msgspec.structs.replace(self.spec, policy=session.policy)))
        header = msgspec.structs.replace(session.header, starts_at_step=step)
        try:
            new = Recorder(path, header)
        except OSError as exc:
            return False, f"cannot record to {path}: {exc.strerror or exc}"
        with self._lock:
            self.recorder = new
        self._publish_recording(force=True)
        return True, f"recording to {path} from step {step}"

    # ------------------------------------------------------------------ service messages
    def _progress(self, stage: str, detail: str = "") -> None:
        self._publish(Progress(stage=stage, detail=detail))

    def _on_state(self, state: str, step: int) -> None:
        self._publish(StateChanged(state=state, step=step))

    def _publish(self, message: Progress | RecordingStatus | StateChanged) -> None:
        if type(message) is Progress:
            self.last_progress = message
        elif type(message) is StateChanged:
            self.last_state = message
        else:
            self.last_recording = message
        line = encode_line(message)
        self._to_listeners(line, False)
        self._to_sinks(message)

    def _status(self) -> RecordingStatus:
        rec = self.recorder
        if rec is None:
            return RecordingStatus(path=None)
        error = None if rec.error is None else (rec.error.strerror or str(rec.error))
        return RecordingStatus(path=rec.path, bytes=rec.bytes_written,
                               records=rec.records_written, error=error)

    def _publish_recording(self, force: bool = False) -> None:
        status = self._status()
        last = self.last_recording
        if status == last:
            return
        now = time.monotonic()
        changed_meaning = (status.path != last.path or status.error != last.error)
        if force or changed_meaning or now - self._status_sent >= STATUS_EVERY_S:
            self._status_sent = now
            self._publish(status)

    def _close_recorder(self, discard_empty: bool = False) -> None:
        with self._lock:
            rec, self.recorder = self.recorder, None
        if rec is None:
            return
        rec.close()
        if discard_empty and not rec.header_written and rec.path != "-":
            try:
                os.unlink(rec.path)  # opened early, but the run never started
            except OSError:
                pass
            return
        status = RecordingStatus(path=None, bytes=rec.bytes_written, records=rec.records_written,
                                 error=None if rec.error is None else
                                 (rec.error.strerror or str(rec.error)), closed=rec.path)
        self.closed_recordings.append(status)
        self._publish(status)

    def _watch_recorder(self) -> None:
        """Publish growing byte counts, and a recorder error within STATUS_POLL_S."""
        while not self.done.wait(STATUS_POLL_S):
            if self.recorder is not None:
                self._publish_recording()
