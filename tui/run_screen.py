"""The screen every run is shown on: a RunPanel over a RunView, a cursor that can follow the
newest step or move through history, and an optional RunSource that keeps appending.

Replay and live are this same screen (Dolphie style): replay is a cursor over a finished or
growing recording; live is a growing stream from an engine process, followed by default, plus
the control keys (tui.live.live_screen). Moving back through a live run is replay of what has
arrived so far; `end` returns to following.

Drawing is throttled, not polled: a message that changes what is shown asks for a frame, and a
frame is painted at once if the last one is older than 1/MAX_FPS, else once when that time
comes. `frames` counts the frames actually painted (bench/bench_tui.py reads it).
"""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer

from tui.widgets.goto_step import GotoStep
from tui.widgets.help_screen import HelpScreen, describe_bindings
from tui.widgets.key_footer import KeyFooter
from tui.messages import RecordsArrived, SeekRequested, StepSelected, StreamEnded
from tui.widgets.replay_bar import ReplayBar
from tui.widgets.run_panel import Mode, RunPanel
from tui.run_source import RunSource
from tui.run_view import RunView
from tui.widgets.status_bar import Status

MAX_FPS = 15
PLAY_HZ = 12  # how often playback moves the cursor
MIN_SPEED, MAX_SPEED = 0.25, 64.0
FALLBACK_STEPS_PER_S = 100.0  # 1x for a recording without usable wall-clock times

NAVIGATION = [
    Binding("left", "step(-1)", "-1", key_display="←", priority=True),
    Binding("right", "step(1)", "+1", key_display="→", priority=True),
    Binding("shift+left", "step(-100)", "-100", key_display="⇧←", priority=True),
    Binding("shift+right", "step(100)", "+100", key_display="⇧→", priority=True),
    Binding("home", "seek_start", "start", priority=True),
    Binding("end", "seek_end", "end", priority=True),
    Binding("n", "jump(1)", "next event"),
    Binding("N", "jump(-1)", "prev event"),
    Binding("g", "goto", "go to"),
    Binding("i", "toggle_info", "vLLM INFO lines", show=False),
    Binding("escape", "unpin", "unpin detail", show=False),
    Binding("question_mark", "help", "help", key_display="?"),
    Binding("q", "quit", "quit"),
]
"""Keys every run screen has: moving through what has arrived."""


class RunScreen(Screen):
    """A run on a RunPanel. Subclasses add keys and say what the status shows."""

    HELP_TITLE = "keys"
    HELP_FOOTER = ""
    PANEL_MODE: Mode = "replay"

    def __init__(self, view: RunView, *, source: RunSource | None = None,
                 following: bool = False, title: str = "", speed: float = 1.0,
                 playing: bool = False, notice: str | None = None) -> None:
        super().__init__()
        self.view = view
        self.source = source
        self.following = following
        self.title_text = title
        self.speed = max(MIN_SPEED, min(MAX_SPEED, speed))
        self.playing = playing
        self.frames = 0  # frames painted
        self._notice = notice
        self._clock = 0.0  # recorded wall-clock seconds the play head is at
        self._carry = 0.0  # fractional steps (recordings without wall-clock times)
        self._last_play = time.monotonic()
        self._last_frame = 0.0
        self._frame_timer: Timer | None = None
        self._plotted: tuple | None = None
        self.stream_over = source is None
        if view.steps and not following:
            view.cursor = view.first_step
            self._clock = view.wall_of(view.cursor)

    # -- lifecycle ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield RunPanel(self.PANEL_MODE, id="panel")
        yield ReplayBar(id="replay-bar")
        yield KeyFooter()

    def on_mount(self) -> None:
        if self._notice:
            self.view.notice(self._notice, "warning")
            self.notify(self._notice, title="recording", severity="warning", timeout=8)
        self.set_interval(1 / PLAY_HZ, self._play_tick)
        self.begin()
        self.draw(plots=True)

    def begin(self) -> None:
        """Start reading the source. Subclasses override this hook, not `on_mount`: Textual
        calls a handler of every class in the MRO, so an overriding handler that also called
        super() would run the base twice."""
        if self.source is not None:
            self.source.start(self)

    def on_unmount(self) -> None:
        if self.source is not None:
            self.source.close()

    # -- what arrives -----------------------------------------------------------------------

    def on_records_arrived(self, _: RecordsArrived) -> None:
        if self.source is None:
            return
        items = self.source.drain()
        if not items:
            return
        view = self.view
        for item in items:
            view.add(item)
        if self.following:
            view.cursor = None
        elif view.cursor is None and view.steps:
            view.cursor = view.first_step
        self.arrived(items)
        self.request_frame()

    def arrived(self, items: list) -> None:
        """Hook for subclasses: records just added to the view."""

    def on_stream_ended(self, message: StreamEnded) -> None:
        self.stream_over = True
        self.on_records_arrived(RecordsArrived())  # anything queued before the end
        if message.error:
            self.view.notice(f"stream ended: {message.error}", "error")
            self.notify(message.error, title="stream", severity="error", timeout=10)
        self.ended(message)
        self.request_frame()

    def ended(self, message: StreamEnded) -> None:
        """Hook for subclasses: the source has nothing more to give."""

    # -- drawing ----------------------------------------------------------------------------

    def request_frame(self) -> None:
        """Paint now, or once when the frame budget allows; never more than MAX_FPS."""
        wait = self._last_frame + 1 / MAX_FPS - time.monotonic()
        if wait <= 0:
            self.draw()
        elif self._frame_timer is None:
            self._frame_timer = self.set_timer(wait, self._timed_frame)

    def _timed_frame(self) -> None:
        self._frame_timer = None
        self.draw()

    def status(self) -> Status:
        """What the status line says beyond the records."""
        view = self.view
        state = "replay"
        if view.abort_visible:
            state = "aborted"
        elif view.finished is not None and view.current_step >= view.last_step:
            state = "finished"
        return Status(state=state, steps_per_s=None, show_wall=False,
                      source=f"replay {self.title_text}" if self.title_text else "replay")

    def banner_footer(self) -> str:
        return "n / N jump between events, ← → step, space plays."

    def plot_range(self) -> tuple[int, int]:
        view = self.view
        return view.first_step, view.last_step

    def draw(self, plots: bool = False) -> None:
        """Paint every widget from the view (plots only if their input changed)."""
        self._last_frame = time.monotonic()
        self.frames += 1
        view = self.view
        panel = self.query_one(RunPanel)
        panel.show_text(view, self.status(), self.banner_footer())
        self.query_one(ReplayBar).show(view.current_step, view.first_step, view.last_step,
                                       self.playing, self.speed, self.following,
                                       f"  {self.title_text}" if self.title_text else "")
        lo, hi = self.plot_range()
        cursor = None if self.following else view.current_step
        key = (lo, hi, cursor, view.version)
        if plots or key != self._plotted:
            panel.show_plots(view, lo, hi, cursor)
            self._plotted = key

    # -- the cursor -------------------------------------------------------------------------

    def seek(self, step: int) -> None:
        view = self.view
        if not view.steps:
            return
        self.following = False
        view.cursor = view.clamp(step)
        self._clock = view.wall_of(view.cursor)
        self.query_one(RunPanel).reset()
        self.draw()  # a key or a click: answer at once

    def follow_newest(self) -> None:
        self.following, self.playing = True, False
        self.view.cursor = None
        self.query_one(RunPanel).reset()
        self.draw()

    def _play_tick(self) -> None:
        now = time.monotonic()
        dt, self._last_play = now - self._last_play, now
        view = self.view
        if not self.playing or self.following or not view.steps:
            return
        if view.cursor is None:
            view.cursor = view.first_step
        if view.steps[-1].wall_s > view.steps[0].wall_s:  # recorded pace available
            self._clock += dt * self.speed
            target = max(view.cursor, view.step_at_wall(self._clock))
        else:
            self._carry += dt * self.speed * FALLBACK_STEPS_PER_S
            advance = int(self._carry)
            self._carry -= advance
            target = view.clamp(view.cursor + advance)
        if target != view.cursor:
            view.cursor = target
            self.request_frame()
        if view.cursor >= view.last_step and self.stream_over:
            self.playing = False
            self.request_frame()

    # -- navigation actions -------------------------------------------------------------------

    def action_step(self, delta: int) -> None:
        self.playing = False
        self.seek(self.view.current_step + delta)

    def action_seek_start(self) -> None:
        self.playing = False
        self.seek(self.view.first_step)

    def action_seek_end(self) -> None:
        self.playing = False
        if self.source is not None and not self.stream_over:
            self.follow_newest()
        else:
            self.seek(self.view.last_step)

    def action_speed(self, factor: float) -> None:
        self.speed = max(MIN_SPEED, min(MAX_SPEED, self.speed * factor))
        self.draw()

    def action_jump(self, direction: int) -> None:
        view = self.view
        here = view.current_step
        event = view.next_event(here) if direction > 0 else view.prev_event(here)
        if event is None:
            self.notify("no further event" if direction > 0 else "no earlier event", timeout=2)
            return
        self.playing = False
        # The abort record stands for the step that raised; its last completed step is one
        # before it.
        self.seek(event.step - 1 if event.kind == "abort" else event.step)
        self.notify(event.text, timeout=3)

    def action_goto(self) -> None:
        def go(step: int | None) -> None:
            if step is not None:
                self.playing = False
                self.seek(step)

        self.app.push_screen(GotoStep(self.view.first_step, self.view.last_step), go)

    def action_toggle_info(self) -> None:
        shown = self.query_one(RunPanel).toggle_info()
        self.notify(f"vLLM INFO lines {'shown' if shown else 'hidden'}", timeout=2)

    def action_unpin(self) -> None:
        self.query_one(RunPanel).reset()
        self.draw()

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.HELP_TITLE, describe_bindings(self.BINDINGS),
                                        self.HELP_FOOTER))

    def action_quit(self) -> None:
        if self.source is not None:
            self.source.close()
        self.app.exit(0)

    # -- messages from the widgets ------------------------------------------------------------

    def on_seek_requested(self, message: SeekRequested) -> None:
        self.playing = False
        self.seek(message.step)

    def on_step_selected(self, message: StepSelected) -> None:
        if self.PANEL_MODE == "replay":
            self.playing = False
            self.seek(message.step)
