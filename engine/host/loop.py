"""EngineLoop: the thread that owns the Session, apart from everything that talks to it (after
vLLM's EngineCore in vllm/v1/engine/core.py, which owns the engine while core_client.py talks to
it).

It imports vLLM and builds the engine, runs it to the end on its own thread, and knows the run's
lifecycle: starting (commands that arrive meanwhile wait in `when_ready`), running, stopping,
over (`done`), or never started (`start_error`). Each record the Session emits is encoded once
into the line a recording holds, handed to the RecordingController, then to the Outbox's
subscribers; the engine thread does nothing slower than appending bytes.

SIGINT, SIGTERM and SIGHUP all stop at the next step boundary (the recording gets its end
record). A second signal gives up on the engine (a step may be stuck) but still seals the
recording with RunFinished(reason="interrupted").
"""

from __future__ import annotations

import signal
import threading
from typing import Callable

from engine.errors import ObservatoryError, one_line
from engine.host.outbox import Outbox
from engine.host.recording import RecordingController
from engine.run_state import RunState
from engine.spec import RunSpec
from engine.stream.protocol import Policies, Progress, StateChanged
from engine.stream.records import STEP_TYPES, Header, Record, RunFinished, encode

WhenReady = Callable[[object], None]  # called with the Session once it is built
WhenFailed = Callable[[str], None]  # called with `start_error` if it never will be


class EngineLoop:
    """Run `spec` on its own thread, recording through `recording`, speaking through `outbox`."""

    def __init__(self, spec: RunSpec, recording: RecordingController, outbox: Outbox, *,
                 freeze_gc: bool = True, pace: float | None = None,
                 hold_s: float | None = None) -> None:
        self.spec = spec
        self.pace = pace  # steps per second (Session's `pace`): wall clock only, not the spec
        self.hold_s = hold_s  # hold this long at the first sign (engine.host.attention)
        self.session = None  # engine.session.Session, once vLLM is imported
        self.finished: RunFinished | None = None
        # Why the engine could not start, as the one line a user sees: an ObservatoryError's
        # own message (it already names the fix), or "the engine could not start: <exception>".
        self.start_error: str | None = None
        self.done = threading.Event()  # the run is over (or never started) and recorded
        self._recording = recording
        self._outbox = outbox
        outbox.on_failure = self._subscriber_failed
        self._freeze_gc = freeze_gc
        self._lock = threading.Lock()  # the session's creation vs commands and stop()
        self._waiting: list[tuple[WhenReady, WhenFailed]] = []  # commands sent before the
        # session existed
        self._cancelled = False
        self._last_step = -1  # the last step streamed
        self._signals = 0
        self._thread: threading.Thread | None = None

    @property
    def state(self) -> RunState:
        return self._outbox.last_state.state

    # ---- lifecycle ----------------------------------------------------------------------
    def prepare(self) -> None:
        """Import vLLM and build the engine on the calling thread. Raises ObservatoryError."""
        if self.session is not None:
            return
        self._recording.open()
        from engine.session import Session  # vLLM and torch load in prepare: "importing vLLM"

        session = Session(self.spec, on_progress=self._progress, on_state=self._on_state,
                          freeze_gc=self._freeze_gc, pace=self.pace)
        session.subscribe(self._on_item)
        if self.hold_s and self.spec.backend == "sim":
            from engine.host.attention import Attention

            session.subscribe(Attention(session, self.hold_s))
        session.prepare()
        self._offer_policies(session)
        with self._lock:
            self.session = session
            waiting, self._waiting = self._waiting, []
        for ready, _ in waiting:
            ready(session)

    def start(self) -> None:
        """Build and run the engine on its own thread; returns at once. `done` is set when the
        run is over (or could not start: see `start_error`)."""
        self._recording.open()
        self._thread = threading.Thread(target=self._main, name="observatory-engine",
                                        daemon=True)
        self._thread.start()
        self._recording.watch(self.done)

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
        except ObservatoryError as exc:
            return self._fail(str(exc))
        except Exception as exc:  # noqa: BLE001  the engine could not start: say so, once
            return self._fail(f"the engine could not start: {one_line(exc)}")
        with self._lock:
            cancelled = self._cancelled
        if cancelled:
            return self._fail("stopped before the first step", state=RunState.STOPPED)
        try:
            self.session.run()
        finally:
            self.done.set()

    def _fail(self, message: str, state: RunState = RunState.FAILED) -> None:
        """The run never started: no recording is left behind, `start_error` says why."""
        with self._lock:
            self.start_error = message
            waiting, self._waiting = self._waiting, []
        for _, failed in waiting:
            failed(message)
        self._recording.discard()
        self._on_state(state, 0)
        self.done.set()

    def when_ready(self, ready: WhenReady, failed: WhenFailed) -> None:
        """Call `ready(session)` once the engine is built (now, if it is), or `failed(why)` if
        it never will be. For commands, which may arrive while vLLM is still importing."""
        with self._lock:
            session, error = self.session, self.start_error
            if session is None and error is None:
                self._waiting.append((ready, failed))
                return
        if session is None:
            failed(error)
        else:
            ready(session)

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
        self.stop_session()
        return True

    def stop_session(self, done: Callable[..., None] | None = None) -> None:
        """Stop the built session at its next boundary, saying "stopping" until it has."""
        session = self.session
        if not session.over and self.state is not RunState.STOPPING:
            self._on_state(RunState.STOPPING, self._last_step + 1)
        session.stop(done)

    def cancel_start(self) -> None:
        """After `stop()` returned False: the run will never start, so remove the recording
        file opened early (it holds nothing). For a process about to exit at once."""
        self._recording.discard()

    def abandon(self, reason: str = "interrupted") -> None:
        """Give up on the engine thread (a step may be stuck): seal the recording with an end
        record now and drop anything the engine emits later."""
        self._recording.seal(reason)
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

    # ---- the engine thread ----------------------------------------------------------------
    def _on_item(self, item: Header | Record) -> None:
        line = encode(item) + b"\n"
        if not self._recording.write(item, line):
            return  # sealed by abandon(): nothing more goes anywhere
        kind = type(item)
        if kind in STEP_TYPES:
            self._last_step = item.step
        elif kind is RunFinished:
            self.finished = item
        self._outbox.recorded(item, line)
        if kind is RunFinished:
            self.done.set()

    def _subscriber_failed(self, subscriber: object, exc: BaseException) -> None:
        """A subscriber raised: end the run with an ObserverError naming it (see Outbox)."""
        session = self.session
        if session is not None and not session.over:
            session.report_sink_failure(subscriber, exc)

    # ---- service messages ---------------------------------------------------------------
    def _offer_policies(self, session) -> None:
        """Say which policies this engine cannot switch to (a picker shows them disabled)."""
        from engine.adapters.policy_support import installed
        from engine.policy import refusals

        spec = session.spec
        self._outbox.publish(Policies(refused=refusals(installed(
            session.header.engine, spec.async_scheduling, spec.backend == "sim"))))

    def _progress(self, stage: str, detail: str = "") -> None:
        self._outbox.publish(Progress(stage=stage, detail=detail))

    def _on_state(self, state: RunState, step: int, why: str = "",
                  hold_s: float | None = None) -> None:
        self._outbox.publish(StateChanged(state=RunState(state), step=step, why=why,
                                          hold_s=hold_s))
