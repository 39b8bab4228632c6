"""Replay: the run screen over a recording, with play/pause and speed.

The plots show the whole run (or everything followed so far) with a cursor line; the table,
detail and event log show the run as it stood at the cursor. 1x plays at the pace the run was
recorded (its wall-clock times); `[`/`]` halve and double that between 0.25x and 64x. With
`--follow` a FollowSource keeps appending and the cursor follows the newest step until you move
it (`end` follows again).

A long recording with an index opens on a window of its last steps, paused at the last one
(tui.replay.lazy), while a WholeRunLoader reads the whole file; a jump outside the window
before that lands decodes the frames it needs, and the whole run then replaces the window
where the cursor is. The same widgets draw both.
"""

from __future__ import annotations

import time

from textual.binding import Binding

from tui.messages import RunLoaded
from tui.playhead import MAX_SPEED, MIN_SPEED
from tui.run_screen import NAVIGATION, RunScreen
from tui.run_source import RunSource
from tui.run_view import RunView

__all__ = ["ReplayScreen", "MIN_SPEED", "MAX_SPEED"]


class ReplayScreen(RunScreen):
    """Move a cursor over `view`; a `source` (a followed file) keeps appending to it."""

    BINDINGS = [
        Binding("space", "play", "play/pause", priority=True),
        Binding("left_square_bracket", "speed(0.5)", "slower", key_display="["),
        Binding("right_square_bracket", "speed(2)", "faster", key_display="]"),
        *NAVIGATION,
    ]
    HELP_TITLE = "replay keys"
    HELP_FOOTER = "Click a point on a plot to seek there; choose a decisions row to seek to it."

    def __init__(self, view: RunView, *, title: str = "", speed: float = 1.0,
                 autoplay: bool = True, source: RunSource | None = None,
                 notice: str | None = None, indexed=None, loader=None) -> None:
        super().__init__(view, source=source, following=source is not None, title=title,
                         speed=speed, playing=autoplay and source is None and loader is None,
                         notice=notice)
        self.indexed = indexed  # engine.stream.indexed.IndexedFile while on a window
        self.loader = loader  # tui.replay.lazy.WholeRunLoader, reading the whole run
        if loader is not None:
            self.playhead.seek(view.last_step)
            self._show_playhead()

    @property
    def windowed(self) -> bool:
        """On a window of the run (the whole run is still being read)."""
        return self.indexed is not None

    def begin(self) -> None:
        super().begin()
        if self.loader is not None:  # once the window is on screen: it must not wait for this
            self.call_after_refresh(self.loader.start, self)

    def span(self) -> tuple[int, int]:
        index = self.indexed.index if self.indexed is not None else None
        if index is not None and index.first_step is not None and index.last_step is not None:
            aborted = (index.summary or {}).get("abort_step")  # shown after the last step
            if isinstance(aborted, int) and aborted == index.last_step + 1:
                return index.first_step, aborted
            return index.first_step, index.last_step
        return super().span()

    def adopt(self, view: RunView) -> None:
        """Show `view` (the whole run, or another window) where the cursor is, playing on if
        it was."""
        head = self.playhead
        self.view = view
        self.playhead = self._playhead_for(view, speed=head.speed, playing=False,
                                           following=False, ended=head.ended)
        self.playhead.seek(head.position)
        self.playhead.playing = head.playing
        self._show_playhead()
        self.query_one("#panel").reset()
        self.draw(plots=True)

    def on_run_loaded(self, message: RunLoaded) -> None:
        if message.view is None:
            self.view.notice(f"could not read the whole recording: {message.error}", "error")
            self.notify(message.error or "", title="recording", severity="error", timeout=10)
            self.indexed = None
            return
        self.indexed = None
        self.adopt(message.view)  # type: ignore[arg-type]

    def on_key(self, _event) -> None:
        self._busy()

    def _busy(self) -> None:
        if self.loader is not None and self.indexed is not None:
            self.loader.busy()  # the whole read pauses while the user moves

    def action_goto(self) -> None:
        self._busy()
        super().action_goto()

    def go(self, step: int) -> None:
        """A jump outside the window, before the whole run is read: decode its frames."""
        self._busy()
        view = self.view
        if self.indexed is not None and view.header is not None \
                and not view.first_step <= step <= view.last_step:
            from tui.replay.lazy import IndexDamaged, window_at

            first, last = self.span()
            try:
                window = window_at(self.indexed, view.header, max(first, min(last, step)))
            except (IndexDamaged, OSError) as exc:
                self.notify(f"that part of the file cannot be read yet ({exc})", timeout=3)
            else:
                window.cursor = view.cursor
                self.view = window
                self.playhead = self._playhead_for(window, speed=self.playhead.speed,
                                                   ended=True)
        super().go(step)

    def action_seek_end(self) -> None:
        self._busy()
        if self.indexed is not None:
            self.go(self.span()[1])
            return
        super().action_seek_end()

    def action_play(self) -> None:
        self.playhead.toggle(time.monotonic())
        self._show_playhead()
        self.draw()

    def redraw(self, force_plots: bool = True) -> None:
        """Paint now (tests and the benchmark call this directly)."""
        self.draw(plots=force_plots)
