"""Swap runway: how many steps are left before vLLM runs out of CPU swap space.

vLLM 0.5 aborts the whole engine when a group it must preempt by swapping does not fit in the
free CPU blocks (issue #5578). The forecast here is deliberately simple, so a user can check it
against the plot: the net number of CPU blocks the swapped queue gained per step over a recent
window, and the free blocks left once room for the next swap-out is set aside,

    runway = (free CPU blocks - blocks the next swap-out needs) / net blocks gained per step

but never less than the steps until the next swap-out is due (the mean gap between recent
swap-outs, less the steps since the last one): nothing can abort before a swap-out happens, and
under a fix the swap-outs come one large group every 30 to 60 steps.

It knows nothing about the future of the workload: groups that finish and free the GPU (which
lets vLLM swap the queue back in) make a projection that "reaches zero" turn out harmless, and a
run whose swap-outs come in rare large lumps is forecast from its average. bench/bench_runway.py
measures the error on recordings that aborted.

Where the steps carry the committed demand (StepRecord.committed_blocks: the worst-case blocks of
every admitted group), a demand that fits GPU + CPU with a swap-out's slack settles it: nothing
admitted can overflow the swap space, so there is no runway to count down (`guaranteed`). Only
once the demand has outgrown them does the rate projection above apply.

After a policy change the rate is measured only over the steps since the change (once there are
MIN_STEPS_AFTER_CHANGE of them), so the runway answers "does the projection still reach zero
under the new policy?".

Pure functions over StepRecords: no UI, no engine; cheap enough for every redraw (one pass over
the window).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine.stream.records import PolicyChanged, StepRecord

WINDOW_STEPS = 100
"""Steps the net swap-out rate is measured over. Long enough to span the gaps between the
one-group-at-a-time swap-outs of the seed workload under `strict` (30 to 50 steps)."""
MIN_STEPS_AFTER_CHANGE = 20
"""Steps after a policy change before the rate is measured under the new policy alone."""
SHORT_RUNWAY_STEPS = 150
"""A runway below this is a warning (at the seed's ~60 steps/s, under three seconds)."""


@dataclass(frozen=True)
class Runway:
    """The swap-space forecast at one step."""

    step: int  # the step the forecast was made at (after it completed)
    free_blocks: int  # CPU blocks free at that step
    total_blocks: int
    rate: float  # net CPU blocks gained per step over the window (> 0: the swap space fills)
    reserve: int  # blocks set aside for the next swap-out (the last group swapped out)
    window: int  # steps the rate was measured over
    since_change: bool  # measured under the latest policy change only
    measuring: bool  # a policy change is too recent: the rate is still the old policy's
    swapout_gap: float | None = None  # mean steps between the window's swap-outs (None: < 2)
    since_swapout: int = 0  # steps since the newest swap-out in the window
    # the committed demand (with a swap-out's slack) fits GPU + CPU: no swap-out of what is
    # admitted can overflow the CPU, whatever the rate says
    guaranteed: bool = False

    @property
    def steps(self) -> float | None:
        """Steps until the next swap-out no longer fits; None while the swap space is not
        filling or cannot run out (`guaranteed`). 0 when it may not fit already."""
        if self.rate <= 0 or self.guaranteed:
            return None
        linear = max(0.0, (self.free_blocks - self.reserve) / self.rate)
        if self.swapout_gap is None:
            return linear
        return max(linear, self.swapout_gap - self.since_swapout)

    @property
    def filling(self) -> bool:
        return self.rate > 0 and self.total_blocks > 0

    @property
    def short(self) -> bool:
        steps = self.steps
        return steps is not None and steps < SHORT_RUNWAY_STEPS

    @property
    def at_step(self) -> int | None:
        """The step at which the projection reaches zero (None: it does not)."""
        steps = self.steps
        return None if steps is None else self.step + round(steps)


def last_swapout_blocks(steps: Sequence[StepRecord], end: int, start: int = 0) -> int:
    """CPU blocks per group of the newest swap-out in steps[start:end] (0: none).

    Read from the CPU-usage jump of a step that swapped out and swapped nothing in, so it is
    exact for that step; a step that did both is skipped (its jump mixes the two).
    """
    for i in range(end - 1, max(start, 1) - 1, -1):
        s = steps[i]
        if s.swapped_out and not s.swapped_in:
            grew = s.cpu_used - steps[i - 1].cpu_used
            if grew > 0:
                return -(-grew // len(s.swapped_out))  # ceil
    return 0


def forecast(steps: Sequence[StepRecord], end: int | None = None, *,
             changed_at: int | None = None, window: int = WINDOW_STEPS) -> Runway | None:
    """The runway after steps[end - 1] (default: the last one). None without two steps.

    `changed_at`: the step number of the latest policy change at or before that step, if any.
    """
    end = len(steps) if end is None else max(0, min(end, len(steps)))
    if end < 2:
        return None
    last = steps[end - 1]
    start = max(0, end - 1 - window)
    since_change = measuring = False
    if changed_at is not None and changed_at <= steps[start].step + 1:
        since_change = True  # the whole window ran under the new policy
    elif changed_at is not None:
        change_index = changed_at - steps[0].step  # steps are contiguous by contract
        if last.step - changed_at + 1 >= MIN_STEPS_AFTER_CHANGE:
            # the step before the change is the baseline: the new policy's first step counts
            start, since_change = max(0, change_index - 1), True
        else:
            measuring = True
    first = steps[start]
    span = last.step - first.step
    rate = (last.cpu_used - first.cpu_used) / span if span > 0 else 0.0
    reserve = last_swapout_blocks(steps, end, max(0, end - 1 - 4 * window))
    outs = [s.step for s in steps[start:end] if s.swapped_out]
    gap = (outs[-1] - outs[0]) / (len(outs) - 1) if len(outs) >= 2 else None
    return Runway(step=last.step, free_blocks=last.cpu_total - last.cpu_used,
                  total_blocks=last.cpu_total, rate=rate, reserve=reserve, window=span,
                  since_change=since_change, measuring=measuring, swapout_gap=gap,
                  since_swapout=last.step - outs[-1] if outs else 0,
                  guaranteed=last.committed_blocks is not None and not last.overcommitted)


def latest_change(changes: Sequence[PolicyChanged], step: int) -> PolicyChanged | None:
    """The newest policy change in force at `step`."""
    found = None
    for change in changes:
        if change.step <= step:
            found = change
    return found


@dataclass(frozen=True)
class LateFix:
    """A run that aborted although a fix policy had been switched on before the abort."""

    change: PolicyChanged  # the last switch to a fix policy before the abort
    steps_before_abort: int  # abort step - the first step the fix governed
    runway: Runway | None  # the forecast just before the fix took over


def late_fix(steps: Sequence[StepRecord], changes: Sequence[PolicyChanged],
             abort_step: int) -> LateFix | None:
    """Whether the abort came after a switch to a fix (any policy but `off`), and how late it
    was: the forecast made at the step before the switch, from the old policy's rate."""
    fix = None
    for change in changes:
        if change.step <= abort_step and change.new != "off":
            fix = change
        elif change.step <= abort_step and change.new == "off":
            fix = None  # switched off again: the abort is not the fix's
    if fix is None or not steps:
        return None
    before = fix.step - steps[0].step  # index of the first step under the fix
    previous = latest_change([c for c in changes if c is not fix], fix.step - 1)
    runway = forecast(steps, before,
                      changed_at=previous.step if previous is not None else None)
    return LateFix(change=fix, steps_before_abort=abort_step - fix.step, runway=runway)


def forecast_errors(steps: Sequence[StepRecord], changes: Sequence[PolicyChanged],
                    abort_step: int, horizons: Sequence[int]) -> dict[int, float | None]:
    """|forecast - truth| in steps, made `h` steps before the abort, for each horizon h.

    The truth is the number of steps that actually remained: the aborting step minus the step
    the forecast was made after. A forecast of "not filling" counts as None (a miss).
    """
    errors: dict[int, float | None] = {}
    first = steps[0].step if steps else 0
    for h in horizons:
        at = abort_step - h  # the forecast is made after step `at`
        end = at - first + 1
        if end < 2 or end > len(steps):
            continue
        change = latest_change(changes, at)
        runway = forecast(steps, end, changed_at=change.step if change else None)
        predicted = runway.steps if runway is not None else None
        errors[h] = None if predicted is None else abs(predicted - h)
    return errors
