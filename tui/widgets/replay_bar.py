"""Where playback is: play state, speed, step, and a progress bar over the run.

One line drawn by one widget from reactive attributes (Textual coalesces their refreshes): a
ProgressBar and an auto-width Label each asked for a layout pass on every update, which made a
seek noticeably slower. While the screen follows the newest step it says so, and nothing about
playing or pausing: a live run that is followed is neither (the engine's own state, running or
paused, is on the status line).
"""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from tui.playhead import Playhead
from tui.widgets.theme import component_roles

ROLES = ("playing", "paused", "following", "done", "todo", "note")


class ReplayBar(Widget):
    DEFAULT_CSS = """
    ReplayBar {
        height: 1;
        padding: 0 1;
        background: $boost;
    }
    ReplayBar > .replay-bar--playing { color: $success; text-style: bold; }
    ReplayBar > .replay-bar--paused { text-style: bold; }
    ReplayBar > .replay-bar--following { color: $text-primary; text-style: bold; }
    ReplayBar > .replay-bar--done { color: $primary; text-style: bold; }
    ReplayBar > .replay-bar--todo { color: $foreground 25%; }
    ReplayBar > .replay-bar--note { text-style: dim; }
    """
    COMPONENT_CLASSES = {f"replay-bar--{role}" for role in ROLES}

    step: reactive[int] = reactive(0)
    first: reactive[int] = reactive(0)
    last: reactive[int] = reactive(0)
    playing: reactive[bool] = reactive(False)
    following: reactive[bool] = reactive(False)
    speed: reactive[float] = reactive(1.0)
    note: reactive[str] = reactive("")
    position: reactive[str | None] = reactive(None)
    """Replaces "step N / M" (the A/B replay aligned on simulated time)."""

    @property
    def fraction(self) -> float:
        return (self.step - self.first) / (self.last - self.first) if self.last > self.first \
            else 1.0

    def show(self, step: int, first: int, last: int, playhead: Playhead, note: str = "",
             position: str | None = None) -> None:
        self.step, self.first, self.last = step, first, last
        self.playing, self.following, self.speed = (playhead.playing, playhead.following,
                                                    playhead.speed)
        self.note, self.position = note, position

    def label(self) -> str:
        """The state word(s) at the left: what a test or a user reads first."""
        if self.following:
            return "● following the newest step"
        return f"{'▶ playing' if self.playing else '‖ paused'} {self.speed:g}×"

    def render(self) -> Text:
        role = component_roles(self, "replay-bar")
        text = Text(no_wrap=True, overflow="crop")
        if self.following:
            text.append(self.label(), role("following"))
        else:
            text.append("▶ playing" if self.playing else "‖ paused",
                        role("playing" if self.playing else "paused"))
            text.append(f" {self.speed:g}×")
        position = self.position if self.position is not None \
            else f"step {self.step:,} / {self.last:,}"
        text.append(f"  {position}  ")
        label_width = text.cell_len + 6 + len(self.note)
        width = max(10, self.content_size.width - label_width)
        filled = int(round(self.fraction * width))
        text.append("━" * filled, role("done"))
        # whole, not partial: a translucent colour is blended over the bar's background
        text.append("━" * (width - filled), self.get_component_rich_style("replay-bar--todo"))
        text.append(f" {self.fraction * 100:3.0f}%")
        if self.note:
            text.append(self.note, role("note"))
        return text
