"""The first sign of trouble in a run: the moment a person watching should reach for the fix.

Each engine kind's bug shows first as something the live status already marks:

- V0 (#5578): the first group swapped out to the CPU. The swap runway's warning and the abort
  come later, and only after swap-outs; by then the fix may no longer save the run (on the
  seed, 0.5.0.post1, `reserve` switched on up to ~175 steps after the first swap-out survives,
  later ones only move the abort).
- V1: the first preemption (#25538's thrash), a stall of the admission watchdog
  (engine.analysis.stall: #31731's head-of-line blocking, #53130), or the first under-filled
  step under async scheduling (engine.analysis.seats: #45257).

`FirstSign` follows a stream one step at a time (O(1) a step) and names the first sign once;
the live monitor's engine holds there so that a person has time to press `f`
(engine.host.attention). Pure: no engine, no UI.
"""

from __future__ import annotations

from engine.analysis.seats import underfilled
from engine.analysis.stall import STARTED, StallWatch


class FirstSign:
    """Say the first sign of trouble, once, as a short phrase ("first swapped group")."""

    def __init__(self, engine: str, max_seqs: int | None = None) -> None:
        self.engine = engine
        self.max_seqs = max_seqs
        self.seen: str | None = None  # the sign, once it has shown
        self._stalls = StallWatch(max_seqs) if engine == "v1" else None

    def add(self, step) -> str | None:
        """Take the next step record; the sign at the step it first shows, else None."""
        if self.seen is not None:
            return None
        sign = self._v1(step) if self._stalls is not None else self._v0(step)
        self.seen = sign
        return sign

    @staticmethod
    def _v0(step) -> str | None:
        return "first swapped group" if step.swapped_out or step.swapped else None

    def _v1(self, step) -> str | None:
        stalled = self._stalls.add(step) == STARTED
        if step.preempted:
            return "first preemption"
        if stalled:
            return f"no admission for {self._stalls.current.steps} steps"
        if self.max_seqs and underfilled(step, self.max_seqs):
            return "first under-filled step"
        return None
