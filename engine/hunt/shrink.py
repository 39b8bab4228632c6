"""Make a hit smaller while the same detector still fires, in the same scheduler state.

Greedy, in the order a reader gains most from: fewer requests (drop halves, then quarters,
..., then one at a time: ddmin's complement step), simpler settings (each feature the draw
switched on switched off, one by one: async scheduling, the CPU tier, prefix caching, shared
prefixes, a long-prefill threshold, `n`, spread arrivals), then shorter prompts and outputs
(all halved at once, then request by request). A candidate is kept when a run of it fires the
same detector; the policy is never changed (a hit under a fix is a hit against that fix).
Every candidate is a full run, so `tries` bounds the work; the result is deterministic for a
case, since each run is.
"""

from __future__ import annotations

from typing import Callable, Iterator

from engine.hunt.case import Case, Row
from engine.hunt.runner import Outcome, run_case

TRIES = 60

Run = Callable[[Case], Outcome]


class Shrunk:
    """The smallest case found, its outcome, and how many runs it took."""

    def __init__(self, case: Case, outcome: Outcome, tries: int) -> None:
        self.case, self.outcome, self.tries = case, outcome, tries


def shrink(case: Case, outcome: Outcome, detector: str, tries: int = TRIES,
           run: Run = run_case) -> Shrunk:
    """The smallest case on which `detector` still fires in the same scheduler state (the
    hit's de-dup key: a smaller case that fires for another reason is another finding)."""
    first = outcome.fired(detector)
    state = first.state if first is not None else None
    best, best_outcome, used = case, outcome, 0
    for candidate in _candidates(lambda: best):
        if used >= tries:
            break
        if candidate is None:
            continue
        used += 1
        result = run(candidate)
        hit = result.fired(detector)
        if hit is not None and hit.state == state:
            best, best_outcome = candidate, result
    return Shrunk(best, best_outcome, used)


def _candidates(best: Callable[[], Case]) -> Iterator[Case | None]:
    """Each candidate from the best case so far (a generator: it sees every improvement)."""
    # fewer requests
    chunk = len(best().rows) // 2
    while chunk >= 1:
        start = 0
        while start < len(best().rows) and len(best().rows) > 1:
            rows = best().rows
            kept = rows[:start] + rows[start + chunk:]
            yield best().replace(rows=kept) if kept else None
            if len(best().rows) == len(rows):  # kept nothing: on to the next chunk
                start += chunk
        chunk = min(chunk // 2, len(best().rows) // 2) if chunk > 1 else 0
    # simpler settings
    for name, simple in (("async_scheduling", False), ("kv_offloading_gib", 0.0),
                         ("enable_prefix_caching", False), ("long_prefill_token_threshold", 0),
                         ("trace_n", 1)):
        settings = best().settings
        if name in settings and settings[name] != simple:
            yield best().replace(settings={**settings, name: simple})
    rows = best().rows
    if any(r.hash_ids and r.hash_ids[0] < 1_000_000 for r in rows):  # shared prefixes
        yield best().replace(rows=[_own(r, i) for i, r in enumerate(rows)])
    if any(r.timestamp for r in best().rows):
        yield best().replace(rows=[_at(r, 0) for r in best().rows])
    # shorter prompts and outputs
    for field in ("input_length", "output_length"):
        yield best().replace(rows=[_halve(r, field) for r in best().rows])
        for i in range(len(best().rows)):
            rows = best().rows
            if i < len(rows) and getattr(rows[i], field) > 1:
                yield best().replace(rows=rows[:i] + [_halve(rows[i], field)] + rows[i + 1:])


def _halve(row: Row, field: str) -> Row:
    value = max(1, getattr(row, field) // 2)
    fields = {"timestamp": row.timestamp, "input_length": row.input_length,
              "output_length": row.output_length, field: value}
    blocks = -(-fields["input_length"] // 512)
    return Row(hash_ids=row.hash_ids[:blocks], **fields)


def _own(row: Row, i: int) -> Row:
    return Row(row.timestamp, row.input_length, row.output_length,
               [2_000_000 + i * 64 + k for k in range(len(row.hash_ids))])


def _at(row: Row, timestamp: int) -> Row:
    return Row(timestamp, row.input_length, row.output_length, row.hash_ids)
