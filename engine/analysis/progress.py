"""The no-progress guard: a run whose engine holds requests but moves none of them is stuck.

The observatory must never hang: a hunter that cannot tell a vLLM livelock from its own hang is
worthless (issue #40). Two rules, either one ends a run (RunFinished reason "no_progress",
exit status 5) with one ERROR line (logger `observatory.guard`) that names what was stuck:

- **Steps without progress.** A step makes progress when it schedules a token, finishes (or,
  on V0, refuses) a request, swaps, or issues or completes a CPU-tier transfer. STEPS steps in
  a row without any of that, while the engine still holds requests or transfers, is stuck:
  nothing it does from there on changes its state (vLLM keeps stepping an engine whose loads
  are never reported, for good). Steps are counted, not seconds, so a sim run and its
  `verify` replay end at the same step.
- **A step that does not return.** The loop started a step (or a sink is handling its record)
  and SECONDS of wall clock passed: whatever blocks it, the run is ended from outside and its
  recording sealed; the blocked thread is abandoned. Idle time (waiting for an arrival, paused)
  is not counted.

STEPS is far above any healthy wait: a slow CPU tier's load (0.5 GB/s) spans tens of idle
steps, the stall presets keep running requests busy while others wait, and a wedged
streaming-seats engine (#53130) schedules its running sessions. Pure and cheap: one comparison
a step; `Session` and the attached `Observer` feed it (and so will the stream producer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.analysis.reasons import reason_text

STEPS = 2000
"""Steps in a row without progress, while requests are held, that end a run."""
SECONDS = 300.0
"""Wall seconds one step (with its record's sinks) may take before the run is ended."""
LOGGER = "observatory.guard"
"""The logger of the one ERROR line that says what was stuck."""
REASON = "no_progress"
"""RunFinished's reason for a run the guard ended (engine.run_state, engine.exit_status)."""


@dataclass(frozen=True)
class Stuck:
    """No progress from step `since` through `step`; `what` says what was held, in words."""

    since: int
    step: int
    what: str

    @property
    def steps(self) -> int:
        return self.step - self.since + 1


def made_progress(s: Any, in_flight_before: int) -> bool:
    """Whether step record `s` (either engine kind) moved anything: a token scheduled, a
    request finished or refused, a swap, a CPU-tier transfer issued or completed."""
    if s.batched_tokens or s.finished or s.ignored or s.swapped_out or s.swapped_in:
        return True
    loads, stores = getattr(s, "cpu_loads", 0), getattr(s, "cpu_stores", 0)
    return bool(loads or stores or getattr(s, "cpu_in_flight", 0) < in_flight_before)


def held(s: Any) -> int:
    """Requests (and CPU-tier transfers) step record `s` leaves the engine holding."""
    return s.running + s.waiting + s.swapped + getattr(s, "cpu_in_flight", 0)


def held_text(s: Any) -> str:
    """What step record `s` holds, in words: "3 running, 2 waiting (head waits for ...)"."""
    parts = [f"{s.running:,} running", f"{s.waiting:,} waiting"]
    if s.swapped:
        parts.append(f"{s.swapped:,} swapped")
    in_flight = getattr(s, "cpu_in_flight", 0)
    if in_flight:
        parts.append(f"{in_flight:,} CPU-tier transfers in flight")
    text = ", ".join(parts)
    reason = reason_text(s)
    return text + (f"; the head waiting request waits for {reason}" if reason else "")


class ProgressGuard:
    """Follows a run's step records (O(1) a step); `add` says, once, when the run is stuck."""

    def __init__(self, steps: int = STEPS, seconds: float = SECONDS) -> None:
        if steps < 1 or not seconds > 0:
            raise ValueError("the guard needs at least one step and a positive time")
        self.steps = steps
        self.seconds = seconds
        self.since: int | None = None  # the first step of the current run without progress
        self._in_flight = 0
        self.stuck: Stuck | None = None

    def add(self, s: Any) -> Stuck | None:
        """Take the next step record; the Stuck at the step the rule is met, else None."""
        progressed = made_progress(s, self._in_flight)
        self._in_flight = getattr(s, "cpu_in_flight", 0)
        if progressed or not held(s):
            self.since = None
            return None
        if self.since is None:
            self.since = s.step
        if self.stuck is not None or s.step - self.since + 1 < self.steps:
            return None
        self.stuck = Stuck(self.since, s.step,
                           f"no token scheduled, computed, loaded or finished for "
                           f"{s.step - self.since + 1:,} steps (since step {self.since:,}) "
                           f"while the engine holds {held_text(s)}")
        return self.stuck

    def overdue(self, step: int, busy_s: float) -> Stuck | None:
        """The Stuck for a step `step` that has been running `busy_s` wall seconds, once it
        is over `seconds`, else None."""
        if busy_s < self.seconds or self.stuck is not None:
            return None
        self.stuck = Stuck(step, step, f"step {step:,} has not returned for "
                                       f"{busy_s:,.0f} s (vLLM's step or a sink of its record "
                                       f"is blocked)")
        return self.stuck
