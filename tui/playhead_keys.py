"""The playhead's keys and their actions, once, for every screen that moves through a run (the
run screen, so replay and live, and the A/B replay).

The Binding objects are declared here and each screen lists the ones it has in its own order
(a narrow footer shows the first ones that fit, so the order is the screen's to choose; Textual
merges BINDINGS only from widget classes, so a mixin cannot carry them). The actions ask the
playhead (tui.playhead) to move and the screen to show it, through a few hooks a screen fills
in: where it is (`here`), how a step number becomes a position (`position_of_step`), what `g`
may go to (`goto_range`), its events (`find_event`), and how it repaints.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from textual.binding import Binding

from tui.widgets.goto_step import GotoStep
from tui.widgets.help_screen import HelpScreen, describe_bindings

if TYPE_CHECKING:
    from tui.playhead import Playhead

STEP_BACK = Binding("left", "step(-1)", "-1", key_display="←", priority=True)
STEP_ON = Binding("right", "step(1)", "+1", key_display="→", priority=True)
STEP_BACK_100 = Binding("shift+left", "step(-100)", "-100", key_display="⇧←", priority=True)
STEP_ON_100 = Binding("shift+right", "step(100)", "+100", key_display="⇧→", priority=True)
SEEK_START = Binding("home", "seek_start", "start", priority=True)
SEEK_END = Binding("end", "seek_end", "end", priority=True)
NEXT_EVENT = Binding("n", "jump(1)", "next event")
PREV_EVENT = Binding("N", "jump(-1)", "prev event")
GOTO = Binding("g", "goto", "go to")
HELP = Binding("question_mark", "help", "help", key_display="?")
QUIT = Binding("q", "quit", "quit")
PLAY = Binding("space", "play", "play/pause", priority=True)
SLOWER = Binding("less_than_sign", "speed(0.5)", "slower", key_display="<")
FASTER = Binding("greater_than_sign", "speed(2)", "faster", key_display=">")


class PlayheadKeys:
    """The actions behind the keys above. A screen mixing this in has a `playhead` and
    `go(position)` (a user's move: the playhead goes, the screen shows it) and `moved()`
    (show where the playhead is now), and fills in the hooks below."""

    playhead: Playhead
    HELP_TITLE = "keys"
    HELP_FOOTER = ""

    # -- hooks a screen fills in -------------------------------------------------------------

    def go(self, position: int) -> None:
        raise NotImplementedError

    def moved(self) -> None:
        raise NotImplementedError

    def repaint(self) -> None:
        """Draw again after a change that moved nothing (the speed, playing or not)."""
        raise NotImplementedError

    def find_event(self, position: int, direction: int) -> tuple[int, str] | None:
        raise NotImplementedError

    def here(self) -> int:
        """The position on screen, that the arrows move from."""
        return self.playhead.position

    def first_position(self) -> int:
        """Where `home` goes."""
        return self.playhead.first

    def goto_range(self) -> tuple[int, int]:
        """The step numbers `g` offers."""
        return self.playhead.first, self.playhead.last

    def position_of_step(self, step: int) -> int:
        """The position a step number `g` was given is at."""
        return step

    # -- what the view and the tests read ----------------------------------------------------

    @property
    def playing(self) -> bool:
        return self.playhead.playing

    @property
    def speed(self) -> float:
        return self.playhead.speed

    # -- the actions -------------------------------------------------------------------------

    def action_step(self, delta: int) -> None:
        self.go(self.here() + delta)

    def action_seek_start(self) -> None:
        self.go(self.first_position())

    def action_seek_end(self) -> None:
        self.playhead.end()
        self.moved()

    def action_play(self) -> None:
        self.playhead.toggle(time.monotonic())
        self.repaint()

    def action_speed(self, factor: float) -> None:
        self.playhead.scale_speed(factor)
        self.repaint()

    def action_jump(self, direction: int) -> None:
        text = self.playhead.jump(direction, self.find_event)
        screen: Any = self
        if text is None:
            screen.notify("no further event" if direction > 0 else "no earlier event",
                          timeout=2)
            return
        self.moved()
        screen.notify(text, timeout=3)

    def action_goto(self) -> None:
        def go(step: int | None) -> None:
            if step is not None:
                self.go(self.position_of_step(step))

        screen: Any = self
        screen.app.push_screen(GotoStep(*self.goto_range()), go)

    def action_help(self) -> None:
        screen: Any = self
        screen.app.push_screen(HelpScreen(self.HELP_TITLE, describe_bindings(screen.BINDINGS),
                                          self.HELP_FOOTER))

    def action_quit(self) -> None:
        screen: Any = self
        screen.app.exit(0)
