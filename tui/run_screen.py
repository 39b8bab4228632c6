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

from tui.widgets.key_footer import KeyFooter
from tui.messages import RecordsArrived, SeekRequested, StepSelected, StreamEnded
from tui.playhead import Playhead, WallPace
from tui.playhead_keys import (GOTO, HELP, NEXT_EVENT, PREV_EVENT, QUIT, SEEK_END, SEEK_START,
                               STEP_BACK, STEP_BACK_100, STEP_ON, STEP_ON_100, PlayheadKeys)
from tui.widgets.replay_bar import ReplayBar
from tui.widgets.run_panel import Mode, RunPanel
from tui.run_source import RunSource
from tui.run_view import RunView
from tui.widgets.status_bar import Status

MAX_FPS = 15
PLAY_HZ = 12  # how often playback moves the cursor
FALLBACK_STEPS_PER_S = 100.0  # 1x for a recording without usable wall-clock times

NAVIGATION = [
    STEP_BACK, STEP_ON, STEP_BACK_100, STEP_ON_100, SEEK_START, SEEK_END,
    NEXT_EVENT, PREV_EVENT, GOTO,
    Binding("i", "toggle_info", "vLLM's INFO and setup lines", show=False),
    Binding("escape", "unpin", "unpin detail", show=False),
    HELP, QUIT,
]
"""Keys every run screen has: moving through what has arrived."""


class RunScreen(PlayheadKeys, Screen):
    """A run on a RunPanel. Subclasses add keys and say what the status shows; the playhead's
    keys act through tui.playhead_keys, on step numbers."""

    PANEL_MODE: Mode = "replay"

    def __init__(self, view: RunView, *, source: RunSource | None = None,
                 following: bool = False, title: str = "", speed: float = 1.0,
                 playing: bool = False, notice: str | None = None) -> None:
        super().__init__()
        self.view = view
        self.source = source
        self.title_text = title
        self.playhead = self._playhead_for(view, speed=speed, playing=playing,
                                           following=following, ended=source is None)
        self.frames = 0  # frames painted
        self._notice = notice
        self._last_frame = 0.0
        self._frame_timer: Timer | None = None
        self._plotted: tuple | None = None
        self._show_playhead()

    @staticmethod
    def _playhead_for(view: RunView, **state) -> Playhead:
        return Playhead(WallPace(view, FALLBACK_STEPS_PER_S), view.first_step, view.last_step,
                        view.first_step, **state)

    # -- the playhead, as the view and the tests see it -------------------------------------

    @property
    def following(self) -> bool:
        return self.playhead.following

    @property
    def stream_over(self) -> bool:
        """The source has nothing more to give (always, for a whole recording)."""
        return self.playhead.ended

    @stream_over.setter
    def stream_over(self, over: bool) -> None:
        self.playhead.ended = over

    def _show_playhead(self) -> None:
        """The view's cursor is the playhead's position (None while following)."""
        view, head = self.view, self.playhead
        head.extend(view.first_step, view.last_step)
        view.cursor = None if head.following or not view.steps else head.position

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
        self._show_playhead()
        self.arrived(items)
        self.request_frame()

    def arrived(self, items: list) -> None:
        """Hook for subclasses: records just added to the view."""

    def on_stream_ended(self, message: StreamEnded) -> None:
        self.stream_over = True
        self.on_records_arrived(RecordsArrived())  # anything queued before the end
        if message.error and not message.refused:  # refused: the screen leaves and says why
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

    def span(self) -> tuple[int, int]:
        """The run's first and last steps, as the bar and `g` say them (a replay opened on a
        window of a long run says the whole run's)."""
        return self.view.first_step, self.view.last_step

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
        first, last = self.span()
        self.query_one(ReplayBar).show(view.current_step, first, last, self.playhead,
                                       f"  {self.title_text}" if self.title_text else "")
        lo, hi = self.plot_range()
        cursor = None if self.following else view.current_step
        key = (lo, hi, cursor, view.version)
        if plots or key != self._plotted:
            panel.show_plots(view, lo, hi, cursor)
            self._plotted = key

    # -- the cursor: every move goes through the playhead -------------------------------------

    def moved(self) -> None:
        """The playhead moved by a user's hand: show it at once (a key or a click)."""
        self._show_playhead()
        self.query_one(RunPanel).reset()
        self.draw()

    def seek(self, step: int) -> None:
        """Show `step` (playing goes on from there; tests and the benchmark call this)."""
        if not self.view.steps:
            return
        self.playhead.seek(step)
        self.moved()

    def follow_newest(self) -> None:
        self.playhead.follow()
        self.moved()

    def _play_tick(self) -> None:
        if not self.view.steps:
            self.playhead.tick(time.monotonic())
            return
        if self.playhead.tick(time.monotonic()):
            self._show_playhead()
            self.request_frame()

    # -- the playhead's keys (tui.playhead_keys): positions are step numbers ------------------

    def go(self, step: int) -> None:
        if self.view.steps:
            self.playhead.go(step)
            self.moved()

    def here(self) -> int:
        return self.view.current_step

    def first_position(self) -> int:
        return self.span()[0]

    def goto_range(self) -> tuple[int, int]:
        return self.span()

    def repaint(self) -> None:
        self._show_playhead()
        self.draw()

    def find_event(self, step: int, direction: int) -> tuple[int, str] | None:
        """The next or previous event's step (the abort's is the step that raised, which the
        view shows after the recorded ones)."""
        view = self.view
        event = view.next_event(step) if direction > 0 else view.prev_event(step)
        if event is None:
            return None
        return view.clamp(event.step), event.text

    def action_toggle_info(self) -> None:
        shown = self.query_one(RunPanel).toggle_info()
        self.notify(f"vLLM's INFO and setup lines {'shown' if shown else 'hidden'}", timeout=2)

    def action_unpin(self) -> None:
        self.query_one(RunPanel).reset()
        self.draw()

    def action_quit(self) -> None:
        if self.source is not None:
            self.source.close()
        super().action_quit()

    # -- messages from the widgets ------------------------------------------------------------

    def on_seek_requested(self, message: SeekRequested) -> None:
        self.go(message.step)

    def on_step_selected(self, message: StepSelected) -> None:
        if self.PANEL_MODE == "replay":
            self.go(message.step)
