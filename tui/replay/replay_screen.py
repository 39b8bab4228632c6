"""Replay: the run screen over a recording, with play/pause and speed.

The plots show the whole run (or everything followed so far) with a cursor line; the table,
detail and event log show the run as it stood at the cursor. 1x plays at the pace the run was
recorded (its wall-clock times); `[`/`]` halve and double that between 0.25x and 64x. With
`--follow` a FollowSource keeps appending and the cursor follows the newest step until you move
it (`end` follows again).
"""

from __future__ import annotations

import time

from textual.binding import Binding

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
                 notice: str | None = None) -> None:
        super().__init__(view, source=source, following=source is not None, title=title,
                         speed=speed, playing=autoplay and source is None, notice=notice)

    def action_play(self) -> None:
        self.playhead.toggle(time.monotonic())
        self._show_playhead()
        self.draw()

    def redraw(self, force_plots: bool = True) -> None:
        """Paint now (tests and the benchmark call this directly)."""
        self.draw(plots=force_plots)
