"""The live monitor: a real vLLM engine in a session thread, drawn by a RunPanel.

Threads never touch widgets. The session's sink (on the engine thread) only appends to a deque;
a 12 Hz timer on this screen drains it into the RunView, writes the new records to the
recording, and updates the widgets in one batch. Building the engine (seconds: torch and vLLM
imports) runs in a thread worker.

The engine thread and this UI share one GIL, so while the engine runs flat out the widgets
refresh at BUSY_HZ and the plots at BUSY_PLOT_HZ (bench/bench_tui.py measures the cost); when
it is paused or done, everything answers at the full tick rate.
"""

from __future__ import annotations

import collections
import gc
import sys
import time
from typing import Callable

import msgspec
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer

from engine.errors import ConfigError
from engine.policy import next_policy, parse_policy
from engine.stream.records import Header, PolicyChanged, RunFinished
from engine.spec import RunSpec
from tui.help_screen import HelpScreen, describe_bindings
from tui.policy_picker import PolicyPicker
from tui.run_panel import RunPanel
from tui.run_view import RunView
from tui.status_bar import Status

GIL_SWITCH_S = 0.05
"""While the live screen runs, the interpreter's GIL switch interval (5 ms by default). The engine
thread is CPU-bound and the UI thread wakes often for short work; with 5 ms the engine is made
to give up the GIL at every UI wake-up, which cost ~25% of its steps/s in bench/bench_tui.py.
50 ms is still far below a frame at TICK_HZ."""
TICK_HZ = 12  # drain the engine's records; refresh everything when the engine is not busy
BUSY_HZ = 4  # status, table, detail, event log while the engine runs
BUSY_PLOT_HZ = 0.5  # plots while the engine runs: plotext builds are the costliest UI work
IDLE_PLOT_HZ = 4
MIN_WINDOW, MAX_WINDOW = 10, 100_000
HINT_OFF = "press f to switch the fix on"


def _session_factory(spec: RunSpec):
    from engine.session import Session  # imported lazily: the app starts before vLLM loads

    return Session(spec)


class LiveScreen(Screen):
    """Run `spec` and watch it; `f` flips the fix while it runs."""

    BINDINGS = [
        Binding("f", "cycle_policy", "fix: cycle policy"),
        Binding("F", "pick_policy", "pick policy"),
        Binding("space", "pause", "pause/resume", priority=True),
        Binding("r", "toggle_record", "record on/off"),
        Binding("a", "burst", "add burst"),
        Binding("R", "restart", "restart"),
        Binding("plus,equals_sign", "window(2)", "window ×2", key_display="+"),
        Binding("minus", "window(0.5)", "window ÷2", key_display="-"),
        Binding("escape", "unpin", "unpin detail", show=False),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, spec: RunSpec, record: str | None, window: int = 2000, *,
                 session_factory: Callable[[RunSpec], object] = _session_factory) -> None:
        super().__init__()
        if record == "-":
            raise ConfigError("live mode draws on the terminal, so it cannot record to stdout "
                              "(-): give a file path or --no-record")
        self.spec = spec
        self.window = max(MIN_WINDOW, min(MAX_WINDOW, window))
        self._factory = session_factory
        self._record_path: str | None = record
        self.session = None  # engine.session.Session
        self.recorder = None  # engine.stream.recorder.Recorder while recording
        self.view = RunView()
        self._buffer: collections.deque = collections.deque()
        self._pending_policy: str | None = None
        self._last_plot = 0.0
        self._last_text = 0.0
        self._plotted_version = -1
        self._error: str | None = None
        self.recordings: list[str] = []  # every recording this screen wrote, in order
        self._quitting = False

    # -- lifecycle ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield RunPanel("live", id="panel")
        yield Footer()

    def on_mount(self) -> None:
        # The UI's own long-lived objects (Textual, Rich, plotext, the widget tree) would
        # otherwise be re-scanned by every full garbage collection the engine thread triggers
        # (tens of ms each with the seed's 80,000 sequences in the heap). Freezing them here,
        # before the engine is built, leaves only the engine's and the run's objects to scan.
        gc.collect()
        gc.freeze()
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_S)
        self.set_interval(1 / TICK_HZ, self._tick)
        self._start()

    def on_unmount(self) -> None:
        sys.setswitchinterval(self._switch_interval)

    def _start(self) -> None:
        self.view = RunView()
        self._buffer = collections.deque()
        self.session = None
        self.query_one(RunPanel).reset()
        self._prepare(self.spec, self._buffer)

    @work(thread=True, exclusive=True, group="engine")
    def _prepare(self, spec: RunSpec, buffer: collections.deque) -> None:
        """Create and build the engine off the UI thread (importing vLLM and torch takes
        seconds), then let it run on its own thread."""
        try:
            session = self._factory(spec)
            session.subscribe(buffer.append)  # the only thing the engine thread does for us
            self.session = session
            session.prepare()
            if not self._quitting:
                session.start()
        except ConfigError as exc:
            self._error = str(exc)
        except Exception as exc:  # anything else: show it instead of a traceback over the UI
            self._error = f"{type(exc).__name__}: {exc}"

    # -- the 12 Hz batch ------------------------------------------------------------------

    def _tick(self) -> None:
        items = []
        buffer = self._buffer
        while buffer:
            items.append(buffer.popleft())
        view = self.view
        for item in items:
            view.add(item)
            self._record(item)
            if isinstance(item, PolicyChanged) and item.new == self._pending_policy:
                self._pending_policy = None
        if self._error is not None:
            self.view.notice(f"could not start the engine: {self._error}", "error")
            self.notify(self._error, title="engine", severity="error", timeout=10)
            self._error = None
        if self.recorder is not None and not items:
            self.recorder.flush()  # the engine may be paused: push buffered records out
        self._update_widgets(force_plots=False)

    def _update_widgets(self, force_plots: bool) -> None:
        panel = self.query_one(RunPanel)
        view = self.view
        now = time.monotonic()
        busy = self.session is not None and self.session.state == "running"
        text_hz, plot_hz = (BUSY_HZ, BUSY_PLOT_HZ) if busy else (TICK_HZ, IDLE_PLOT_HZ)
        if force_plots or now - self._last_text >= 0.9 / text_hz:
            panel.show_text(view, self._status(), self._banner_footer())
            self._last_text = now
        if view.version != self._plotted_version and (
                force_plots or (self._over and not self._buffer)
                or now - self._last_plot >= 0.9 / plot_hz):
            hi = view.last_step
            lo = max(view.first_step, hi - self.window + 1)
            panel.show_plots(view, lo, hi)
            self._plotted_version = view.version
            self._last_plot = now

    def _status(self) -> Status:
        state = self.session.state if self.session is not None else "starting"
        policy = self.view.policy
        hint = ""
        if state in ("running", "paused", "starting") and policy == "off" \
                and self._pending_policy is None:
            hint = HINT_OFF
        elif state in ("aborted", "finished", "stopped"):
            hint = "press R to restart" + (" (f first: restart with the fix on)"
                                           if policy == "off" else "")
        rec = self.recorder
        return Status(state=state, steps_per_s=self._steps_per_s(), show_wall=True,
                      recording=rec.path if rec is not None else None,
                      recording_bytes=rec.bytes_written if rec is not None else 0, hint=hint)

    def _steps_per_s(self) -> float | None:
        steps = self.view.steps
        if len(steps) < 2:
            return None
        last = steps[-1]
        first = steps[max(0, len(steps) - 200)]
        dt = last.wall_s - first.wall_s
        return (last.step - first.step) / dt if dt > 0 else None

    def _banner_footer(self) -> str:
        return "Everything stays on screen for inspection. R restarts the run, q quits."

    # -- recording --------------------------------------------------------------------------

    def _record(self, item) -> None:
        if isinstance(item, Header):
            if self._record_path is not None and self.recorder is None:
                self._open_recorder(item, self._record_path)
            return
        rec = self.recorder
        if rec is None:
            return
        rec.write(item)
        if rec.error is not None:
            self.view.notice(f"recording stopped: {rec.error}", "error")
            self._close_recorder(notice=False)
        elif isinstance(item, RunFinished):
            self._close_recorder()

    def _open_recorder(self, header: Header, path: str) -> None:
        from engine.stream.recorder import Recorder

        try:
            self.recorder = Recorder(path, header)
        except OSError as exc:
            self.view.notice(f"cannot record to {path}: {exc}", "error")
            self._record_path = None
            return
        self.recordings.append(self.recorder.path)
        self.view.notice(f"recording to {self.recorder.path}"
                         + (f" from step {header.starts_at_step}" if header.starts_at_step else ""))

    def _close_recorder(self, notice: bool = True) -> None:
        rec, self.recorder = self.recorder, None
        self._record_path = None
        if rec is None:
            return
        rec.close()
        if notice:
            self.view.notice(f"recording closed: {rec.path} ({rec.records_written} records, "
                             f"{rec.bytes_written:,} bytes)")

    def _default_path(self) -> str:
        from engine.stream.recorder import default_recording_path

        spec = msgspec.structs.replace(self.spec, policy=self.view.policy)
        return str(default_recording_path(spec))  # never an existing file's name

    # -- actions ----------------------------------------------------------------------------

    @property
    def _over(self) -> bool:
        """The session ran and is done (a session still being built is not over)."""
        return self.session is not None and self.session.state in ("aborted", "finished",
                                                                   "stopped")

    def _starting(self) -> bool:
        if self.session is None:
            self.notify("the engine is still starting", timeout=2)
            return True
        return False

    def action_cycle_policy(self) -> None:
        if self._starting():
            return
        base = self._pending_policy or (self.view.policy if self._over else self.session.policy)
        self._set_policy(str(next_policy(parse_policy(base))))

    def action_pick_policy(self) -> None:
        if self._starting():
            return
        current = self._pending_policy or self.view.policy
        self.app.push_screen(PolicyPicker(current),
                             lambda picked: picked and self._set_policy(picked))

    def _set_policy(self, policy: str) -> None:
        if self._over:
            # The session is dead: the choice applies to the restart.
            self.spec = msgspec.structs.replace(self.spec, policy=policy)
            self._pending_policy = policy
            self.notify(f"policy {policy} will apply when you restart (R)", timeout=4)
        else:
            self._pending_policy = policy
            self.session.set_policy(policy, source="tui")
        self._update_widgets(force_plots=False)

    def action_pause(self) -> None:
        session = self.session
        if session is None or self._over:
            return
        if session.state == "paused":
            session.resume()
        else:
            session.pause()

    def action_burst(self) -> None:
        if self.session is not None and not self._over:
            self.session.add_burst(source="tui")

    def action_toggle_record(self) -> None:
        if self.recorder is not None:
            self._close_recorder()
        elif self._over:
            self.notify("the run is over: nothing left to record", timeout=4)
            return
        else:
            path = self._default_path()
            header = self.session.header if self.session is not None else None
            if header is None:
                self._record_path = path  # opened when the Header arrives
                self.view.notice(f"will record to {path}")
            else:
                # Records up to view.last_step were drained before this point; all later ones
                # belong to the next step on.
                start = self.view.last_step + 1 if self.view.steps else 0
                self._open_recorder(msgspec.structs.replace(header, starts_at_step=start), path)
        self._update_widgets(force_plots=False)

    def action_restart(self) -> None:
        if self.session is None or not self._over:
            self.notify("the run is still going: R restarts after an abort or finish",
                        timeout=4)
            return
        was_recording = bool(self.recordings) or self._record_path is not None
        self._close_recorder(notice=False)
        self._pending_policy = None
        self._record_path = self._default_path() if was_recording else None
        self._start()
        self._update_widgets(force_plots=True)

    def action_window(self, factor: float) -> None:
        self.window = int(max(MIN_WINDOW, min(MAX_WINDOW, self.window * factor)))
        self.notify(f"plot window: {self.window:,} steps", timeout=2)
        self._plotted_version = -1
        self._update_widgets(force_plots=True)

    def action_unpin(self) -> None:
        self.query_one(RunPanel).reset()
        self._update_widgets(force_plots=True)

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(
            "live monitor keys", describe_bindings(self.BINDINGS),
            "Click a decisions row (or enter) to pin that step in the detail pane."))

    def action_quit(self) -> None:
        self.shutdown()
        self.app.exit(0)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop the engine, write what it produced last, close the recording. Idempotent."""
        self._quitting = True
        session = self.session
        if session is not None and session.state in ("running", "paused", "starting"):
            session.stop()
            session.join(timeout)
        self._tick_drain_only()
        self._close_recorder()

    def _tick_drain_only(self) -> None:
        while self._buffer:
            item = self._buffer.popleft()
            self.view.add(item)
            self._record(item)
