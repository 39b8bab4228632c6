"""What every widget renders from: the run index (engine.stream.run.Run) plus the step the
screen is looking at.

Live and replay are the same thing here: records are appended as they arrive (from an engine
process, a followed file, or a whole recording at once) and `cursor` says which step is shown.
`cursor` is None while following the newest step. Nothing here imports textual.

When vLLM aborts, the step it raised in is one more step here (engine.conventions): `get`,
`last_step` and the plot series reach past the recorded steps to `Run.aborting_step()`, so the
status line, the plots, the decisions table, the step detail and the cursor all show "step 805"
with the 104 groups vLLM left swapped, as `summary` and `export` say. `steps`, `len()` and
`recorded_last_step` hold only what the stream held (the reader checks them against the
file's index).
"""

from __future__ import annotations

from engine.kinds import EngineKind, kind_of
from engine.stream.records import StepRecord, V1StepRecord
from engine.stream.run import COLUMNS, JUMP_KINDS, SERIES, Event, EventKind, Run

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
    def aborting(self) -> StepRecord | V1StepRecord | None:
        """The step vLLM raised in, shown after the recorded ones; None without one."""
        return self.aborting_step()

    @property
    def recorded_last_step(self) -> int:
        return super().last_step

    @property
    def last_step(self) -> int:
        """The last step to show: the aborting step when vLLM aborted."""
        aborting = self.aborting
        return aborting.step if aborting is not None else super().last_step

    def get(self, n: int) -> StepRecord | V1StepRecord | None:
        aborting = self.aborting
        if aborting is not None and n == aborting.step:
            return aborting
        return super().get(n)

    def step_at_wall(self, wall_s: float) -> int:
        aborting = self.aborting
        if aborting is not None and self.steps and wall_s >= aborting.wall_s \
                and aborting.wall_s > self.steps[-1].wall_s:
            return aborting.step
        return super().step_at_wall(wall_s)

    def series(self, name: str, lo: int, hi: int, points: int):
        """The run's series, with the aborting step's point after the recorded ones where it
        has one (queues, KV, the committed demand, the running totals): the plots end at what
        vLLM left, as the status line and `summary`'s peaks do. Rates have none: the step
        never ran."""
        xs, ys = super().series(name, lo, hi, points)
        aborting = self.aborting
        if aborting is None or not lo <= aborting.step <= hi or name.endswith("_tps") \
                or name == "recompute_pct":
            return xs, ys
        import numpy as np

        value = COLUMNS[name](aborting) if name in COLUMNS else getattr(aborting, name)
        return np.append(xs, float(aborting.step)), np.append(ys, float(value))

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
    def kind(self) -> EngineKind:
        """The run's engine kind (`engine`), to ask what its vocabulary is."""
        return kind_of(self.engine)

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
        """Whether the abort has happened as of the shown step: the aborting step is shown (or,
        when the view has none to show, the last step before it)."""
        if self.abort is None:
            return False
        shown = self.abort.step if self.aborting is not None else self.abort.step - 1
        return self.cursor is None or self.cursor >= shown
