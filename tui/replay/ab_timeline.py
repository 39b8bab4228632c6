"""The A/B replay's shared cursor: one position, and the step each run is at there.

Two alignments:

- "step": position = step number. A run that ended earlier (it aborted) stays at its last
  step, so its end, and its abort banner, stay in view while the other one goes on.
- "time": position = simulated milliseconds since the run started. Each run is at the last
  step that had ended by then, so a run whose steps are slower (a fix that batches less) is
  compared with the other at the same moment of simulated time rather than at the same step.

The positions are every step number of either run, or every step end time of either run, so
one key press (→) always moves at least one run by one step. Plain Python and numpy; tested
without an app.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from engine.stream.timeaxis import axis_of
from tui.run_view import RunView

Align = Literal["step", "time"]


@dataclass
class Timeline:
    views: list[RunView]
    align: Align = "step"
    positions: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        # each run on its own time axis (engine.stream.timeaxis): simulated, or measured on a GPU
        clocks = [axis_of(view.header).clock for view in self.views]
        self._sim_ms = [np.fromiter((clock(s) * 1000.0 for s in _shown(view)), dtype=float)
                        for view, clock in zip(self.views, clocks)]
        runs = [view for view in self.views if view.steps]
        if not runs:
            self.positions = [0.0]
        elif self.align == "step":
            first = min(view.first_step for view in runs)
            last = max(view.last_step for view in runs)
            self.positions = [float(n) for n in range(first, last + 1)]
        else:
            self.positions = np.unique(np.concatenate(
                [ms for ms in self._sim_ms if len(ms)])).tolist()

    def __len__(self) -> int:
        return len(self.positions)

    def clamp(self, index: int) -> int:
        return max(0, min(len(self.positions) - 1, index))

    def step_at(self, run: int, index: int) -> int:
        """The step run `run` is at when the cursor is at `index`."""
        view = self.views[run]
        if not view.steps:
            return 0
        x = self.positions[self.clamp(index)]
        if self.align == "step":
            return view.clamp(int(x))
        found = bisect.bisect_right(self._sim_ms[run], x + 1e-9) - 1
        return view.first_step + max(0, found)

    def index_of(self, x: float) -> int:
        """The position at or before `x` (a step number or sim milliseconds)."""
        return self.clamp(bisect.bisect_right(self.positions, x + 1e-9) - 1)

    def x_of(self, run: int, step: int) -> float:
        """Where step `step` of run `run` is on the shared axis."""
        if self.align == "step":
            return float(step)
        view = self.views[run]
        index = max(0, min(len(self._sim_ms[run]) - 1, step - view.first_step))
        return float(self._sim_ms[run][index]) if len(self._sim_ms[run]) else 0.0

    def index_of_step(self, run: int, step: int) -> int:
        return self.index_of(self.x_of(run, step))

    def xs(self, run: int, steps: np.ndarray) -> np.ndarray:
        """Step numbers of run `run` (a plot's x values) mapped onto the shared axis."""
        if self.align == "step" or not len(steps):
            return steps
        view = self.views[run]
        index = np.clip(steps.astype(int) - view.first_step, 0, len(self._sim_ms[run]) - 1)
        return self._sim_ms[run][index]

    @property
    def span(self) -> tuple[float, float]:
        return self.positions[0], max(self.positions[-1], self.positions[0] + 1)

    def label(self, x: float) -> str:
        """A tick label: a step number, or simulated seconds."""
        return f"{x:,.0f}" if self.align == "step" else f"{x / 1000:.1f}s"


def _shown(view: RunView) -> list:
    """The steps a run shows: the recorded ones, then the step vLLM raised in, if it did."""
    aborting = view.aborting
    return [*view.steps, aborting] if aborting is not None else view.steps


class TimelinePace:
    """How the A/B replay plays: positions are the timeline's indices; 1x is
    `steps_per_s` steps a second aligned on steps, and simulated time itself aligned on time."""

    def __init__(self, timeline: Timeline, steps_per_s: float) -> None:
        self.timeline = timeline
        self.units_per_s = steps_per_s if timeline.align == "step" else 1000.0  # sim ms

    def value_of(self, position: int) -> float:
        return self.timeline.positions[self.timeline.clamp(position)]

    def position_at(self, value: float) -> int:
        return self.timeline.index_of(value)
