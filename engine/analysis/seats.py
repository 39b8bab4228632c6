"""Seats held by tokens in flight: vLLM #45257 read off V1 step records.

Under async scheduling vLLM schedules step N+1 before step N's output is back. A request whose
last token (its max_tokens) is in flight is passed by in step N+1, yet it is still in vLLM's
running list, and vLLM's waiting scan counts that list against `max_num_seqs`: the step reports
the seats full (`head_reason` "seats") while it scheduled fewer than `max_num_seqs` requests.
The admission watchdog (engine.analysis.stall) never calls that a stall, rightly: vLLM counts
every seat as taken. This module counts it for what it is: an under-filled step.

Pure functions over step records (the summary, the bench script and the tests read the same
numbers); a record of another engine kind, or one without a reason, is never under-filled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


def scheduled_count(s: Any) -> int:
    """Requests step record `s` scheduled: admitted, resumed or already running."""
    return len(s.new) + len(s.resumed) + len(s.scheduled)


def underfilled(s: Any, max_seqs: int) -> bool:
    """Whether step record `s` left requests waiting because every seat was counted taken
    (`head_reason` "seats") while it scheduled fewer than `max_seqs` requests."""
    return (getattr(s, "head_reason", None) == "seats" and s.waiting > 0
            and scheduled_count(s) < max_seqs)


@dataclass(frozen=True)
class Underfill:
    """How much of a run was under-filled: steps in all, and the longest run of them."""

    steps: int
    longest: int
    longest_since: int | None  # the first step of the longest run


def underfill(steps: Sequence[Any], max_seqs: int) -> Underfill:
    """Count the under-filled steps of a run and its longest consecutive run of them."""
    total = longest = run = 0
    since = start = None
    for s in steps:
        if underfilled(s, max_seqs):
            total += 1
            if run == 0:
                start = s.step
            run += 1
            if run > longest:
                longest, since = run, start
        else:
            run = 0
    return Underfill(total, longest, since)


RECENT_STEPS = 20
"""The window the live status judges under-filling over: #45257 under-fills every other step,
so one step alone would flicker the warning on and off."""


def recent_underfill(steps: Sequence[Any], end: int, max_seqs: int | None,
                     window: int = RECENT_STEPS) -> tuple[int, int, Any] | None:
    """Under-filled steps among the `window` steps up to `steps[end]` (the status line's
    view): (how many, of how many, the latest under-filled record), or None when none was
    or the run's `max_num_seqs` is unknown."""
    if not max_seqs or end < 0 or not steps:
        return None
    end = min(end, len(steps) - 1)
    start = max(0, end - window + 1)
    count, latest = 0, None
    for s in steps[start:end + 1]:
        if underfilled(s, max_seqs):
            count += 1
            latest = s
    return (count, end - start + 1, latest) if count else None
