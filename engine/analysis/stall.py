"""Admission watchdog: a V1 scheduler that has stopped admitting while its KV cache has room.

vLLM #53130 (0.27.1): the scheduler stops admitting for good while the KV cache is mostly free:
requests wait, nothing new or preempted is scheduled, the engine reports healthy, and only a
restart recovers. The records already say everything needed to see it: a step that admitted
someone has `new` or `resumed` entries, and `waiting` and `gpu_used` say whether anyone was
left out and whether the blocks were there for them.

A stall, at a step, is the run of steps ending there in which every step had requests waiting,
admitted none, had a seat free (fewer running than `max_num_seqs`, when the run's header says
it) and left at least ROOM_FRACTION of the GPU KV blocks free. It is reported once it is
MIN_STEPS long. Seats are counted as running requests: vLLM also counts paused streaming-input
sessions against `max_num_seqs`, and seats held by sessions whose clients went quiet are #53130's
wedge (the head's reason then says `seats`), so those are a stall. A full house of running
requests is capacity, not a stall: the waiting get a seat when a running request finishes. A
policy that refuses admissions on purpose (`whole-context`, marked `withheld`) is not a stall:
it refuses only while the blocks are short.

Pure functions over step records (either engine kind; a V0 record is never a stall here: V0
records admissions as prefills of groups, and its starvation is #5578's, with its own runway),
cheap enough for every redraw: the scan stops at the first step that breaks the run and never
looks back more than SCAN_LIMIT steps. StallWatch follows a stream one step at a time (the
summary's longest stall, `exec`'s warning lines) and says when a stall starts and ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from engine.analysis.reasons import reason_text
from engine.conventions import percent
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
    # the least GPU KV free at any of its steps' ends, in % of all blocks: what was free
    # throughout (engine.conventions); the reason's own "N free" is vLLM's count at its scan
    free_pct: float
    reason: str = ""  # what the head waiting request waits for at `step`, as recorded ("": not)

    @property
    def steps(self) -> int:
        return self.step - self.since + 1


def seat_limit(header: Any) -> int | None:
    """The run's `max_num_seqs`, from its Header's engine config (a run's or an attached
    engine's: vLLM's own SchedulerConfig); None when the header does not say."""
    config = getattr(header, "engine_config", None) or {}
    scheduler = config.get("scheduler") if isinstance(config, dict) else None
    seats = scheduler.get("max_num_seqs") if isinstance(scheduler, dict) else None
    return seats if isinstance(seats, int) and not isinstance(seats, bool) and seats > 0 \
        else None


def stalled_step(s: StepRecord | V1StepRecord, room_fraction: float = ROOM_FRACTION,
                 max_seqs: int | None = None) -> bool:
    """Whether step record `s` admitted no one while requests waited and a seat and KV
    room were free."""
    if type(s) is not V1StepRecord:  # V0 records admission as prefills of groups: not here
        return False
    if s.new or s.resumed or s.withheld or s.waiting <= 0 or s.gpu_total <= 0:
        return False
    if max_seqs is not None and s.running >= max_seqs:
        return False
    return s.gpu_total - s.gpu_used >= room_fraction * s.gpu_total


def admission_stall(steps: Sequence[StepRecord | V1StepRecord], end: int | None = None, *,
                    min_steps: int = MIN_STEPS, room_fraction: float = ROOM_FRACTION,
                    max_seqs: int | None = None) -> Stall | None:
    """The stall that ends at `steps[end]` (default: the last), if it is `min_steps` long."""
    if not steps:
        return None
    end = len(steps) - 1 if end is None else end
    if not 0 <= end < len(steps) or not stalled_step(steps[end], room_fraction, max_seqs):
        return None
    i = end
    stop = max(0, end - SCAN_LIMIT)
    least = _free(steps[end])
    while i > stop and stalled_step(steps[i - 1], room_fraction, max_seqs):
        i -= 1
        least = min(least, _free(steps[i]))
    if end - i + 1 < min_steps:
        return None
    return _stall(steps[i].step, steps[end], least)


def _free(s: V1StepRecord) -> int:
    return s.gpu_total - s.gpu_used


def _stall(since: int, last: V1StepRecord, least_free: int) -> Stall:
    return Stall(since=since, step=last.step, waiting=last.waiting,
                 free_pct=percent(least_free, last.gpu_total), reason=reason_text(last))


STARTED, ENDED = "started", "ended"
"""What StallWatch.add says about a step: a stall reached MIN_STEPS there, or it is over."""


class StallWatch:
    """The watchdog over a stream, one step record at a time (O(1) a step): the stall in
    progress, the one that just ended, and the longest so far (a stall still going at the
    end of a run counts as long as it got)."""

    def __init__(self, max_seqs: int | None = None, *, min_steps: int = MIN_STEPS,
                 room_fraction: float = ROOM_FRACTION) -> None:
        self.max_seqs = max_seqs
        self.min_steps = min_steps
        self.room_fraction = room_fraction
        self.since: int | None = None  # the first step of the current run of stalled steps
        self.least_free = 0  # the fewest KV blocks free at any step of that run
        self.current: Stall | None = None  # the stall in progress, once min_steps long
        self.ended: Stall | None = None  # the last stall that is over
        self.longest: Stall | None = None

    def add(self, s: StepRecord | V1StepRecord) -> str | None:
        """Take the next step; STARTED at the step a stall reaches `min_steps`, ENDED at the
        first step that breaks it (`ended` holds it), else None."""
        if not stalled_step(s, self.room_fraction, self.max_seqs):
            self.since = None
            if self.current is None:
                return None
            self.ended, self.current = self.current, None
            return ENDED
        if self.since is None:
            self.since, self.least_free = s.step, _free(s)  # type: ignore[arg-type]
        self.least_free = min(self.least_free, _free(s))  # type: ignore[arg-type]
        if s.step - self.since + 1 < self.min_steps:
            return None
        started = self.current is None
        self.current = _stall(self.since, s, self.least_free)  # type: ignore[arg-type]
        if self.longest is None or self.current.steps > self.longest.steps:
            self.longest = self.current
        return STARTED if started else None


def stall_text(stall: Stall, compact: bool, reason: bool = True) -> str:
    """The status line's words for it (the step detail's too), with what the head request
    waits for when the records say and `reason` (a narrow status drops it last)."""
    if compact:
        return f"⚠ no admission {stall.steps:,} steps" + (
            f": waits for {stall.reason}" if stall.reason and reason else "")
    text = (f"⚠ no admission for {stall.steps:,} steps while KV has room "
            f"(≥{int(stall.free_pct)}% free throughout, {stall.waiting:,} waiting)")
    return text + (f": head request waits for {stall.reason}" if stall.reason and reason
                   else "")
