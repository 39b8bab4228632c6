"""The index of one run: its records in order, step N in O(1), events by kind, and per-step
series. A recording loads into one (`engine.stream.reader.load`), a follower or a live stream
appends to one as records arrive.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any, Callable

import msgspec

from engine.stream.records import (Arrivals, EngineAborted, Header, LogLine, ObserverError,
                                   PolicyChanged, Record, RunFinished, StepRecord)

# ---- the indexed run ----------------------------------------------------------------------

# Step-derived event kinds: steps where something happened, for "jump to next swap-out".
_STEP_KINDS: dict[str, Callable[[StepRecord], bool]] = {
    "swap_out": lambda s: bool(s.swapped_out),
    "swap_in": lambda s: bool(s.swapped_in),
    "recompute": lambda s: bool(s.recomputed),
    "ignored": lambda s: bool(s.ignored),
    "withheld": lambda s: s.withheld,
}
# Record kinds, by the `kind` tag they carry in the file.
_RECORD_KINDS: dict[type, str] = {Arrivals: "arrivals", PolicyChanged: "policy",
                                  EngineAborted: "abort", LogLine: "log", RunFinished: "end",
                                  ObserverError: "observer_error"}
EVENT_KINDS: tuple[str, ...] = (*_STEP_KINDS, *_RECORD_KINDS.values())


def _numeric_fields() -> dict[str, Callable[[StepRecord], float]]:
    getters: dict[str, Callable[[StepRecord], float]] = {}
    for field in msgspec.structs.fields(StepRecord):
        if field.type in (int, float, bool):
            getters[field.name] = (lambda n: lambda s: float(getattr(s, n)))(field.name)
    getters.update({
        "gpu_pct": lambda s: s.gpu_pct,
        "cpu_pct": lambda s: s.cpu_pct,
        "prefill_tokens": lambda s: float(sum(t for _, t in s.prefills)),
        "n_prefills": lambda s: float(len(s.prefills)),
        "n_swapped_out": lambda s: float(len(s.swapped_out)),
        "n_swapped_in": lambda s: float(len(s.swapped_in)),
        "n_recomputed": lambda s: float(len(s.recomputed)),
        "n_finished": lambda s: float(len(s.finished)),
        "n_first_tokens": lambda s: float(len(s.first_tokens)),
    })
    return getters


SERIES: dict[str, Callable[[StepRecord], float]] = _numeric_fields()
"""Names `Recording.series()` accepts: every numeric StepRecord field plus a few derived ones."""


class Recording:
    """One run, indexed: step N in O(1), next/previous event of a kind by bisection, and cached
    per-step series for plots. `append()` keeps the indexes current, so a follower can build one
    incrementally from `follow()`."""

    def __init__(self, header: Header, path: str = "<memory>") -> None:
        self.path = path
        self.header = header
        self.items: list[Record] = []  # every record after the header, in order
        self.steps: list[StepRecord] = []  # index = step - first_step
        self.first_step: int = header.starts_at_step
        self.abort: EngineAborted | None = None
        self.finished: RunFinished | None = None
        self.truncated = False  # the last line (or zstd frame) was cut
        self.skipped_lines = 0  # corrupt lines skipped in lenient mode
        self._events: dict[str, list[Record]] = {k: [] for k in _RECORD_KINDS.values()}
        self._event_steps: dict[str, list[int]] = {k: [] for k in EVENT_KINDS}
        self._series: dict[str, list[float]] = {}
        self._gaps = False  # steps are contiguous unless lenient loading skipped one
        self._step_numbers: list[int] | None = None

    # building

    def append(self, item: Record) -> None:
        self.items.append(item)
        if type(item) is StepRecord:
            if not self.steps:
                self.first_step = item.step
            elif item.step != self.steps[-1].step + 1:
                self._step_numbers = None  # a gap (a skipped corrupt line): index by bisection
                self._gaps = True
            self.steps.append(item)
            for kind, happened in _STEP_KINDS.items():
                if happened(item):
                    self._event_steps[kind].append(item.step)
            return
        kind = _RECORD_KINDS[type(item)]
        self._events[kind].append(item)
        self._event_steps[kind].append(getattr(item, "step", self.last_step or 0))
        if type(item) is EngineAborted:
            self.abort = item
        elif type(item) is RunFinished:
            self.finished = item

    # random access

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def last_step(self) -> int | None:
        return self.steps[-1].step if self.steps else None

    def step(self, n: int) -> StepRecord:
        """The record of step `n` (absolute step number); IndexError if not recorded."""
        i = n - self.first_step
        if self._gaps:
            if self._step_numbers is None or len(self._step_numbers) != len(self.steps):
                self._step_numbers = [s.step for s in self.steps]
            i = bisect_left(self._step_numbers, n)
            if i < len(self.steps) and self.steps[i].step != n:
                i = -1
        if not 0 <= i < len(self.steps):
            raise IndexError(f"step {n} is not in {self.path} "
                             f"(it holds steps {self.first_step}..{self.last_step})")
        return self.steps[i]

    def events(self, kind: str) -> list[Any]:
        """Records of a record kind ("policy", "arrivals", ...) or steps of a step kind."""
        self._check_kind(kind)
        if kind in _STEP_KINDS:
            return [self.step(n) for n in self._event_steps[kind]]
        return list(self._events[kind])

    def event_steps(self, kind: str) -> list[int]:
        self._check_kind(kind)
        return self._event_steps[kind]

    def next_event(self, kind: str, step: int) -> int | None:
        """The first step after `step` at which an event of `kind` happened, or None."""
        steps = self.event_steps(kind)
        i = bisect_right(steps, step)
        return steps[i] if i < len(steps) else None

    def prev_event(self, kind: str, step: int) -> int | None:
        """The last step before `step` at which an event of `kind` happened, or None."""
        steps = self.event_steps(kind)
        i = bisect_left(steps, step)
        return steps[i - 1] if i > 0 else None

    def series(self, name: str) -> list[float]:
        """One float per recorded step (cached; extended as steps are appended)."""
        getter = SERIES.get(name)
        if getter is None:
            raise KeyError(f"unknown series {name!r}; known: {', '.join(SERIES)}")
        values = self._series.setdefault(name, [])
        if len(values) < len(self.steps):
            values.extend(getter(s) for s in self.steps[len(values):])
        return values

    @property
    def policy_changes(self) -> list[PolicyChanged]:
        return self._events["policy"]  # type: ignore[return-value]

    @property
    def arrivals(self) -> list[Arrivals]:
        return self._events["arrivals"]  # type: ignore[return-value]

    def all_items(self) -> list[Header | Record]:
        """Header then records: what a session's subscriber saw, e.g. for summarize()."""
        return [self.header, *self.items]

    @staticmethod
    def _check_kind(kind: str) -> None:
        if kind not in EVENT_KINDS:
            raise KeyError(f"unknown event kind {kind!r}; known: {', '.join(EVENT_KINDS)}")


