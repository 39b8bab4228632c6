"""Replay: the live monitor's RunPanel driven by a cursor over a recording.

The plots show the whole run (or everything followed so far) with a cursor line; the table,
detail and event log show the run as it stood at the cursor. 1× plays at the pace the run was
recorded (its wall-clock times); `[`/`]` halve and double that between 0.25× and 64×.
With `--follow` a thread worker reads the growing file (or stdin) into a deque that the 12 Hz
tick drains, exactly as the live screen drains its session.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Callable, Iterator

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer

from engine.stream.records import Header
from tui.goto_step import GotoStep
from tui.help_screen import HelpScreen, describe_bindings
from tui.messages import SeekRequested, StepSelected
from tui.replay_bar import ReplayBar
from tui.run_panel import RunPanel
from tui.run_view import RunView
from tui.status_bar import Status

TICK_HZ = 12
PLOT_HZ = 6
MIN_SPEED, MAX_SPEED = 0.25, 64.0
FALLBACK_STEPS_PER_S = 100.0  # 1× for a recording without usable wall-clock times


class ReplayScreen(Screen):
    """Move a cursor over `view`; `follow` (an iterator factory) keeps appending to it."""

    BINDINGS = [
        Binding("space", "play", "play/pause", priority=True),
        Binding("left", "step(-1)", "-1", key_display="←", priority=True),
        Binding("right", "step(1)", "+1", key_display="→", priority=True),
        Binding("shift+left", "step(-100)", "-100", key_display="⇧←", priority=True),
        Binding("shift+right", "step(100)", "+100", key_display="⇧→", priority=True),
        Binding("home", "seek_start", "start", priority=True),
        Binding("end", "seek_end", "end", priority=True),
        Binding("left_square_bracket", "speed(0.5)", "slower", key_display="["),
        Binding("right_square_bracket", "speed(2)", "faster", key_display="]"),
        Binding("n", "jump(1)", "next event"),
        Binding("N", "jump(-1)", "prev event"),
        Binding("g", "goto", "go to"),
        Binding("escape", "unpin", "unpin detail", show=False),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, view: RunView, *, title: str = "", speed: float = 1.0,
                 autoplay: bool = True,
                 follow: Callable[[threading.Event], Iterator] | None = None,
                 notice: str | None = None) -> None:
        super().__init__()
        self.view = view
        self.title_text = title
        self.speed = max(MIN_SPEED, min(MAX_SPEED, speed))
        self.playing = autoplay
        self._follow = follow
        self.following = follow is not None
        self._buffer: collections.deque = collections.deque()
        self._stop = threading.Event()
        self._notice = notice
        self._clock = 0.0  # recorded wall-clock seconds the play head is at
        self._carry = 0.0  # fractional steps (recordings without wall-clock times)
        self._last_tick = time.monotonic()
        self._last_plot = 0.0
        self._plotted: tuple | None = None
        self._follow_error: str | None = None
        if view.steps:
            view.cursor = view.last_step if self.following else view.first_step
            self._clock = view.wall_of(view.cursor)

    # -- lifecycle ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield RunPanel("replay", id="panel")
        yield ReplayBar(id="replay-bar")
        yield Footer()

    def on_mount(self) -> None:
        if self._notice:
            self.view.notice(self._notice, "warning")
            self.notify(self._notice, title="recording", severity="warning", timeout=8)
        self.set_interval(1 / TICK_HZ, self._tick)
        if self._follow is not None:
            self._read_follow()
        self.redraw(force_plots=True)

    def on_unmount(self) -> None:
        self._stop.set()

    @work(thread=True, exclusive=True, group="follow")
    def _read_follow(self) -> None:
        """Read the growing file or stdin; only appends to the deque (the tick drains it)."""
        assert self._follow is not None
        try:
            for item in self._follow(self._stop):
                self._buffer.append(item)
        except Exception as exc:  # RecordingError and friends: say so, keep what we have
            self._follow_error = str(exc)

    # -- the tick -------------------------------------------------------------------------

    def _tick(self) -> None:
        now = time.monotonic()
        dt, self._last_tick = now - self._last_tick, now
        view = self.view
        grew = False
        while self._buffer:
            item = self._buffer.popleft()
            if isinstance(item, Header) and view.header is not None:
                continue
            view.add(item)
            grew = True
        if self._follow_error is not None:
            view.notice(f"follow stopped: {self._follow_error}", "error")
            self.notify(self._follow_error, title="follow", severity="error", timeout=10)
            self._follow_error = None
        if not view.steps:
            if grew:
                self.redraw(force_plots=False)
            return
        moved = False
        if self.following:
            if view.cursor != view.last_step:
                view.cursor = view.last_step
                self._clock = view.wall_of(view.cursor)
                moved = True
        elif self.playing:
            if view.cursor is None:
                view.cursor = view.first_step
            if self._has_wall_clock():
                self._clock += dt * self.speed
                target = max(view.cursor, view.step_at_wall(self._clock))
            else:
                self._carry += dt * self.speed * FALLBACK_STEPS_PER_S
                advance = int(self._carry)
                self._carry -= advance
                target = view.clamp(view.cursor + advance)
            if target != view.cursor:
                view.cursor, moved = target, True
            if view.cursor >= view.last_step and (view.finished or self._follow is None):
                self.playing = False
                moved = True
        if moved or grew:
            self.redraw(force_plots=False)

    def _has_wall_clock(self) -> bool:
        """1× is the recorded pace, unless the recording has no usable wall-clock times."""
        steps = self.view.steps
        return steps[-1].wall_s > steps[0].wall_s

    # -- drawing --------------------------------------------------------------------------

    def status(self) -> Status:
        view = self.view
        state = "replay"
        if view.abort_visible:
            state = "aborted"
        elif view.finished is not None and view.cursor is not None \
                and view.cursor >= view.last_step:
            state = "finished"
        return Status(state=state, steps_per_s=None, show_wall=False,
                      source=f"replay {self.title_text}" if self.title_text else "replay")

    def redraw(self, force_plots: bool = True) -> None:
        view = self.view
        panel = self.query_one(RunPanel)
        status = self.status()
        panel.show_text(view, status, "n / N jump between events, ← → step, space plays.")
        bar = self.query_one(ReplayBar)
        note = f"  {self.title_text}" if self.title_text else ""
        bar.show(view.current_step, view.first_step, view.last_step, self.playing, self.speed,
                 self.following, note)
        key = (view.first_step, view.last_step, view.cursor, view.version)
        now = time.monotonic()
        if key != self._plotted and (force_plots or now - self._last_plot >= 1 / PLOT_HZ):
            panel.show_plots(view, view.first_step, view.last_step, view.current_step)
            self._plotted = key
            self._last_plot = now

    def seek(self, step: int) -> None:
        view = self.view
        if not view.steps:
            return
        self.following = False
        view.cursor = view.clamp(step)
        self._clock = view.wall_of(view.cursor)
        self.query_one(RunPanel).reset()
        self.redraw(force_plots=True)

    # -- actions ----------------------------------------------------------------------------

    def action_play(self) -> None:
        view = self.view
        if not self.playing and view.cursor is not None and view.cursor >= view.last_step \
                and self._follow is None:
            self.seek(view.first_step)  # play again from the start
        self.following = False
        self.playing = not self.playing
        self._last_tick = time.monotonic()
        self.redraw(force_plots=False)

    def action_step(self, delta: int) -> None:
        self.playing = False
        self.seek(self.view.current_step + delta)

    def action_seek_start(self) -> None:
        self.seek(self.view.first_step)

    def action_seek_end(self) -> None:
        self.seek(self.view.last_step)
        if self._follow is not None:
            self.following = True
            self.redraw(force_plots=False)

    def action_speed(self, factor: float) -> None:
        self.speed = max(MIN_SPEED, min(MAX_SPEED, self.speed * factor))
        self.redraw(force_plots=False)

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
        target = event.step - 1 if event.kind == "abort" else event.step
        self.seek(target)
        self.notify(event.text, timeout=3)

    def action_goto(self) -> None:
        view = self.view

        def go(step: int | None) -> None:
            if step is not None:
                self.playing = False
                self.seek(step)

        self.app.push_screen(GotoStep(view.first_step, view.last_step), go)

    def action_unpin(self) -> None:
        self.query_one(RunPanel).reset()
        self.redraw(force_plots=False)

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(
            "replay keys", describe_bindings(self.BINDINGS),
            "Click a point on a plot to seek there; choose a decisions row to seek to it."))

    def action_quit(self) -> None:
        self._stop.set()
        self.app.exit(0)

    # -- messages from the widgets ------------------------------------------------------------

    def on_seek_requested(self, message: SeekRequested) -> None:
        self.playing = False
        self.seek(message.step)

    def on_step_selected(self, message: StepSelected) -> None:
        self.playing = False
        self.seek(message.step)
