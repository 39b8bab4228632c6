"""Admission watchdog: a V1 scheduler that has stopped admitting while its KV cache has room.

vLLM #53130 (0.27.1): the scheduler stops admitting for good while the KV cache is mostly free:
requests wait, nothing new or preempted is scheduled, the engine reports healthy, and only a
restart recovers. The records already say everything needed to see it: a step that admitted
someone has `new` or `resumed` entries, and `waiting` and `gpu_used` say whether anyone was
left out and whether the blocks were there for them.

A stall, at a step, is the run of steps ending there in which every step had requests waiting,
admitted none, and left at least ROOM_FRACTION of the GPU KV blocks free. It is reported once
it is MIN_STEPS long. A policy that refuses admissions on purpose (`whole-context`, marked
`withheld`) is not a stall: it refuses only while the blocks are short.

Pure functions over step records (either engine kind; a V0 record is never a stall here: V0
records admissions as prefills of groups, and its starvation is #5578's, with its own runway), cheap enough for every redraw: the scan stops at the first step
that breaks the run and never looks back more than SCAN_LIMIT steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine.stream.records import StepRecord, V1StepRecord

MIN_STEPS = 100
"""Steps without an admission, while KV has room, before the watchdog speaks. A healthy V1 run
admits within a few steps of a request arriving when blocks are free; 100 is far above that."""
ROOM_FRACTION = 0.5
"""The share of GPU KV blocks that must be free for "KV has room" (the issue saw ~80% free)."""
SCAN_LIMIT = 100_000
"""The most steps one call looks back: a longer stall is reported as at least this long."""


@dataclass(frozen=True)
class Stall:
    """No admission since `since` (the first step of the run) through `step`."""

    since: int
    step: int
    waiting: int  # requests waiting at `step`
    free_pct: float  # GPU KV blocks free at `step`, in %

    @property
    def steps(self) -> int:
        return self.step - self.since + 1


def stalled_step(s: StepRecord | V1StepRecord, room_fraction: float = ROOM_FRACTION) -> bool:
    """Whether step record `s` admitted no one while requests waited and KV had room."""
    if type(s) is not V1StepRecord:  # V0 records admission as prefills of groups: not here
        return False
    if s.new or s.resumed or s.withheld or s.waiting <= 0 or s.gpu_total <= 0:
        return False
    return s.gpu_total - s.gpu_used >= room_fraction * s.gpu_total


def admission_stall(steps: Sequence[StepRecord | V1StepRecord], end: int | None = None, *,
                    min_steps: int = MIN_STEPS,
                    room_fraction: float = ROOM_FRACTION) -> Stall | None:
    """The stall that ends at `steps[end]` (default: the last), if it is `min_steps` long."""
    if not steps:
        return None
    end = len(steps) - 1 if end is None else end
    if not 0 <= end < len(steps) or not stalled_step(steps[end], room_fraction):
        return None
    i = end
    stop = max(0, end - SCAN_LIMIT)
    while i > stop and stalled_step(steps[i - 1], room_fraction):
        i -= 1
    if end - i + 1 < min_steps:
        return None
    last = steps[end]
    return Stall(since=steps[i].step, step=last.step, waiting=last.waiting,
                 free_pct=100.0 * (last.gpu_total - last.gpu_used) / last.gpu_total)


def stall_text(stall: Stall, compact: bool) -> str:
    """The status line's words for it."""
    if compact:
        return f"⚠ no admission {stall.steps:,} steps"
    return (f"⚠ no admission for {stall.steps:,} steps while KV has room "
            f"({stall.free_pct:.0f}% free, {stall.waiting:,} waiting)")
