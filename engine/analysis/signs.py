"""The signs of trouble in a run: the moments a person watching should reach for the fix.

Each engine kind's bug shows first as something the live status already marks:

- V0 (#5578): the committed demand outgrowing GPU + CPU (StepRecord.overcommitted: from then
  on a swap-out can overflow the CPU), then the first group swapped out. The swap runway's
  warning and the abort come later, when `reserve` may no longer save the run: on the seed,
  0.5.0.post1 survives `reserve` switched on up to ~175 steps after the first swap-out, 0.10.2
  at it, but 0.6.3.post1 only before step 3, the step after its demand outgrew GPU + CPU.
- V1: the first preemption (#25538's thrash), a stall of the admission watchdog
  (engine.analysis.stall: #31731's head-of-line blocking, #53130), an under-filled step under
  async scheduling (engine.analysis.seats: #45257).

`Signs` follows a stream one step at a time (O(1) a step) and names each kind of sign the first
time it shows; the live monitor's engine holds there so that a person has time to press `f`
(engine.host.attention). Pure: no engine, no UI.
"""

from __future__ import annotations

from engine.analysis.seats import underfilled
from engine.conventions import ratio_text
from engine.analysis.stall import STARTED, StallWatch
from engine.kinds import kind_of


class Signs:
    """Say each kind of sign once, at the step it first shows, as a short phrase."""

    def __init__(self, engine: str, max_seqs: int | None = None) -> None:
        self.engine = engine
        self.max_seqs = max_seqs
        self.seen: list[str] = []  # the kinds that have shown, in order
        self._stalls = StallWatch(max_seqs) if kind_of(engine).watches_stalls else None

    def add(self, step) -> str | None:
        """Take the next step record; the words of a kind of sign that shows for the first
        time at it, else None (one a step: the first kind in the order below)."""
        shown = self._v1(step) if self._stalls is not None else self._v0(step)
        for kind, words in shown:
            if kind not in self.seen:
                self.seen.append(kind)
                return words
        return None

    @staticmethod
    def _v0(step) -> list[tuple[str, str]]:
        shown = []
        if step.overcommitted:  # a ratio, not a percentage: it passes 1 (engine.conventions)
            ratio = ratio_text(step.committed_blocks, step.capacity_blocks)
            shown.append(("committed", f"the committed demand outgrew GPU + CPU ({ratio})"))
        if step.swapped_out or step.swapped:
            shown.append(("swapped", "first swapped group"))
        return shown

    def _v1(self, step) -> list[tuple[str, str]]:
        shown = []
        if self._stalls.add(step) == STARTED:
            shown.append(("stall", f"no admission for {self._stalls.current.steps} steps"))
        if step.preempted:
            shown.append(("preempted", "first preemption"))
        if self.max_seqs and underfilled(step, self.max_seqs):
            shown.append(("underfilled", "first under-filled step"))
        return shown
