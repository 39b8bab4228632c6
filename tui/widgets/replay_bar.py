"""Where the replay is: play state, speed, step, and a progress bar over the recording.

One line drawn by one widget: Textual's ProgressBar and an auto-width Label each asked for a
layout pass on every update, which made a seek noticeably slower.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class ReplayBar(Static):
    DEFAULT_CSS = """
    ReplayBar {
        height: 1;
        padding: 0 1;
        background: $boost;
    }
    """

    def on_mount(self) -> None:
        self._state: tuple | None = None
        self.fraction = 0.0

    def show(self, step: int, first: int, last: int, playing: bool, speed: float,
             following: bool = False, note: str = "", position: str | None = None) -> None:
        """`position` replaces "step N / M" (the A/B replay aligned on simulated time)."""
        state = (step, first, last, playing, speed, following, note, position, self.size.width)
        if state == self._state:
            return
        self._state = state
        self.fraction = (step - first) / (last - first) if last > first else 1.0
        text = Text(no_wrap=True, overflow="crop")
        text.append("▶ playing" if playing else "‖ paused", "bold #98e024" if playing else "bold")
        text.append(f" {speed:g}×")
        if following:
            text.append("  following", "#58d1eb")
        text.append(f"  {position}  " if position is not None else f"  step {step:,} / {last:,}  ")
        label_width = text.cell_len + 6 + len(note)
        width = max(10, self.size.width - 2 - label_width)
        filled = int(round(self.fraction * width))
        text.append("━" * filled, "bold #ae81ff")
        text.append("━" * (width - filled), "grey37")
        text.append(f" {self.fraction * 100:3.0f}%")
        if note:
            text.append(note, "dim")
        self.update(text, layout=False)

    def on_resize(self) -> None:
        self._state = None
