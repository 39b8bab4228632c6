"""Every message the observatory's widgets post, in one place (Toolong style).

Widgets post these upwards; the live and replay screens decide what they mean (a seek in replay,
nothing in live). Data flows the other way by plain method calls on the UI thread, batched by
the screen's refresh timer.
"""

from __future__ import annotations

from textual.message import Message


class SeekRequested(Message):
    """The user pointed at a step (a click on a plot, a row chosen in the decisions table)."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step


class StepSelected(Message):
    """A decisions-table row was chosen: show that step in full."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step
