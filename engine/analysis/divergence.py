"""Where two runs' scheduler decisions part: the A/B replay's "first difference".

Two runs of the same workload (fix off and on, two vLLM versions, two cost models) make the same
decisions until something differs. Steps are compared by number, on the decisions only: what was
scheduled, preempted, swapped, finished and held back. Times, the policy name and the queue
sizes that follow from the decisions are left out, so "off" and "strict" do not differ at step 0
just because their policy names do.
"""

from __future__ import annotations

from typing import Sequence

from engine.stream.records import StepRecord

DECISION_FIELDS = ("prefills", "decode_groups", "decode_seqs", "swapped_out", "swapped_in",
                   "recomputed", "ignored", "finished", "batched_tokens", "withheld")


def decision_diff(a: StepRecord, b: StepRecord) -> list[str]:
    """The decision fields in which two steps differ (empty: the same decisions)."""
    return [name for name in DECISION_FIELDS if getattr(a, name) != getattr(b, name)]


def first_difference(a: Sequence[StepRecord], b: Sequence[StepRecord]) -> int | None:
    """The first step number at which the runs' decisions differ; None if they never do.

    Steps are contiguous within each run. If one run is a prefix of the other (same decisions
    until one stopped or aborted), the first difference is the first step only one run has.
    """
    if not a or not b:
        return None
    start = max(a[0].step, b[0].step)
    stop = min(a[-1].step, b[-1].step)
    for number in range(start, stop + 1):
        if decision_diff(a[number - a[0].step], b[number - b[0].step]):
            return number
    if a[-1].step != b[-1].step:
        return stop + 1
    return None
