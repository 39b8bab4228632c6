"""What every widget renders from: the run index (engine.stream.run.Run) plus the step the
screen is looking at.

Live and replay are the same thing here: records are appended as they arrive (from an engine
process, a followed file, or a whole recording at once) and `cursor` says which step is shown.
`cursor` is None while following the newest step. Nothing here imports textual.
"""

from __future__ import annotations

from engine.stream.records import StepRecord
from engine.stream.run import JUMP_KINDS, SERIES, Event, EventKind, Run

__all__ = ["Event", "EventKind", "JUMP_KINDS", "RunView", "SERIES"]


class RunView(Run):
    """A Run with a cursor."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.cursor: int | None = None
        self.planned_policy = "off"  # what to show before the stream says anything
        self.planned_engine = "v0"  # the engine kind expected before the header says
        self.reference = None  # engine.analysis.logs.reference.Reference: a real log overlaid

    @property
    def events(self) -> list[Event]:
        """Every display event so far (the event log's source)."""
        return self.log

    @property
    def engine(self) -> str:
        """The engine kind of the run: the header's, or the one expected until it arrives (a
        local engine runs the installed vLLM), so the screens speak its words from the start."""
        return self.header.engine if self.header is not None else self.planned_engine

    @property
    def current_step(self) -> int:
        """The step the screen shows: the cursor, or the newest step while following."""
        return self.last_step if self.cursor is None else self.cursor

    @property
    def current(self) -> StepRecord | None:
        return self.get(self.current_step)

    @property
    def policy(self) -> str:
        """The policy in force at the shown step."""
        s = self.current
        if s is not None:
            return s.policy
        if self.policy_changes:
            return self.policy_changes[-1].new
        if self.header is not None:
            return str(self.header.spec.get("policy", "off"))
        return self.planned_policy

    @property
    def abort_visible(self) -> bool:
        """Whether the abort has happened as of the shown step."""
        return self.abort is not None and (self.cursor is None
                                           or self.cursor >= self.abort.step - 1)
