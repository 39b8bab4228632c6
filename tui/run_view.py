"""The view model every screen renders from: the records of one run seen so far.

Live mode appends to a RunView as the engine produces records; replay builds one from a whole
recording and moves `cursor` over it. Widgets never look at a Session or a reader, only at a
RunView, which is why the live and replay screens can share every widget.

Nothing here imports textual: the model is plain Python (plus numpy for downsampling) and is
tested without an app.
"""

from __future__ import annotations

import bisect
from operator import attrgetter
from dataclasses import dataclass, field
from typing import Iterable, Literal

import msgspec
import numpy as np

from engine.stream.records import (Arrivals, EngineAborted, Header, LogLine, PolicyChanged, Record,
                            RunFinished, StepRecord)

EventKind = Literal["policy", "swapout", "abort", "log", "burst", "finished", "notice"]
JUMP_KINDS: tuple[EventKind, ...] = ("policy", "swapout", "abort")
"""The events `n`/`N` jump between."""

SWAPOUT_QUIET_STEPS = 20
"""A swap-out starts a new "burst" event after this many steps without one, so a run that swaps
on every step for a while shows one event, not hundreds."""

SERIES = ("gpu_pct", "cpu_pct", "running", "swapped", "waiting", "prompt_tps", "gen_tps")
"""Names accepted by `RunView.series`. The *_tps ones are tokens per simulated second."""


@dataclass(frozen=True)
class Event:
    """Something worth a line in the event log (and, for JUMP_KINDS, a place to jump to)."""

    step: int
    kind: EventKind
    text: str
    level: str = "info"  # "info" | "warning" | "error": how the log colours it


@dataclass
class RunView:
    """All records of one run seen so far, with per-step series kept as flat lists.

    `cursor` is None while following the newest step (live), or the step number the screen is
    looking at (replay).
    """

    header: Header | None = None
    steps: list[StepRecord] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    policy_changes: list[PolicyChanged] = field(default_factory=list)
    abort: EngineAborted | None = None
    finished: RunFinished | None = None
    cursor: int | None = None
    version: int = 0  # bumped on every change, so widgets can skip redundant redraws

    def __post_init__(self) -> None:
        self._cols: dict[str, list[float]] = {
            "gpu_pct": [], "cpu_pct": [], "running": [], "swapped": [], "waiting": [],
            "prompt_tokens": [], "generated_tokens": [], "sim_step_s": [], "wall_s": [],
        }
        self._event_steps: list[int] = []
        self._last_swapout: int | None = None
        self._cache: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    # -- building -------------------------------------------------------------------------

    @classmethod
    def from_items(cls, items: Iterable[Header | Record]) -> "RunView":
        view = cls()
        view.add_many(items)
        return view

    def add_many(self, items: Iterable[Header | Record]) -> None:
        for item in items:
            self.add(item)

    def add(self, item: Header | Record) -> None:
        """Take one item of a session stream or recording, in order."""
        self.version += 1
        if type(item) is StepRecord:
            self._add_step(item)
        elif isinstance(item, Header):
            self.header = item
        elif isinstance(item, PolicyChanged):
            self.policy_changes.append(item)
            self._event(Event(item.step, "policy",
                              f"policy {item.old} → {item.new} from step {item.step} "
                              f"(source {item.source})"))
        elif isinstance(item, EngineAborted):
            self.abort = item
            self._event(Event(item.step, "abort",
                              f"ABORTED at step {item.step}: {item.error}: {item.message} "
                              f"(swapped {item.swapped}, CPU KV {item.cpu_pct:.1f}%)", "error"))
        elif isinstance(item, LogLine):
            repeats = f" (×{item.repeats})" if item.repeats > 1 else ""
            level = {"WARNING": "warning", "ERROR": "error", "CRITICAL": "error"}.get(
                item.level, "info")
            self._event(Event(item.step, "log",
                              f"vLLM {item.level} {item.logger}: {item.message}{repeats}", level))
        elif isinstance(item, Arrivals):
            if item.source != "workload":
                self._event(Event(item.step, "burst",
                                  f"{len(item.request_ids)} requests added ({item.source})"))
        elif isinstance(item, RunFinished):
            self.finished = item
            self._event(Event(self.last_step if self.steps else 0, "finished",
                              f"run finished: {item.reason} after {item.steps} steps",
                              "error" if item.reason == "aborted" else "info"))

    def notice(self, text: str, level: str = "info") -> None:
        """A UI-side event (recording switched on, restart...), logged at the newest step."""
        self.version += 1
        self._event(Event(self.last_step if self.steps else 0, "notice", text, level))

    def _event(self, event: Event) -> None:
        self.events.append(event)
        self._event_steps.append(event.step)

    def _add_step(self, s: StepRecord) -> None:
        if self.steps and s.step != self.steps[-1].step + 1:
            self._bridge(s)
            if s.step <= self.steps[-1].step:
                return
        self.steps.append(s)
        if s.swapped_out or s.recomputed:
            if self._last_swapout is None or s.step - self._last_swapout > SWAPOUT_QUIET_STEPS:
                what = []
                if s.swapped_out:
                    what.append(f"{len(s.swapped_out)} swapped out")
                if s.recomputed:
                    what.append(f"{len(s.recomputed)} preempted for recompute")
                self._event(Event(s.step, "swapout",
                                  f"preemption burst: {', '.join(what)} (swapped {s.swapped}, "
                                  f"CPU KV {s.cpu_pct:.1f}%)", "warning"))
            self._last_swapout = s.step

    def _bridge(self, s: StepRecord) -> None:
        """Steps are contiguous by contract; a lenient read of a damaged recording can skip
        some. Keep step N at index N - first_step by repeating the last step over the gap, and
        say so, rather than crash the screen or show steps at the wrong place."""
        last = self.steps[-1]
        if s.step <= last.step:
            self._event(Event(last.step, "notice", f"step {s.step} arrived again after step "
                              f"{last.step}; ignored", "warning"))
            return
        self._event(Event(last.step + 1, "notice", f"steps {last.step + 1}–{s.step - 1} are "
                          f"missing from the stream; shown as repeats of step {last.step}",
                          "warning"))
        for number in range(last.step + 1, s.step):
            self.steps.append(msgspec.structs.replace(last, step=number))

    def _column(self, name: str) -> list[float]:
        """A per-step column, extended lazily from `steps` (in bulk, when a plot asks), so
        adding a step costs the UI thread next to nothing."""
        self._sync_columns()
        return self._cols[name]

    def _sync_columns(self) -> None:
        done = len(self._cols["wall_s"])
        if done == len(self.steps):
            return
        new = self.steps[done:]
        for name, column in self._cols.items():  # StepRecord fields and its *_pct properties
            column.extend(map(attrgetter(name), new))

    # -- looking up -----------------------------------------------------------------------

    @property
    def first_step(self) -> int:
        return self.steps[0].step if self.steps else 0

    @property
    def last_step(self) -> int:
        return self.steps[-1].step if self.steps else 0

    def __len__(self) -> int:
        return len(self.steps)

    def step(self, number: int) -> StepRecord | None:
        index = number - self.first_step
        if 0 <= index < len(self.steps):
            return self.steps[index]
        return None

    def clamp(self, number: int) -> int:
        return max(self.first_step, min(self.last_step, number))

    @property
    def current_step(self) -> int:
        """The step the screen shows: the cursor, or the newest step while following."""
        return self.last_step if self.cursor is None else self.cursor

    @property
    def current(self) -> StepRecord | None:
        return self.step(self.current_step)

    @property
    def policy(self) -> str:
        """The policy in force at the current step."""
        s = self.current
        if s is not None:
            return s.policy
        if self.policy_changes:
            return self.policy_changes[-1].new
        if self.header is not None:
            return str(self.header.spec.get("policy", "off"))
        return "off"

    @property
    def abort_visible(self) -> bool:
        """Whether the abort has happened as of the current step."""
        return self.abort is not None and (self.cursor is None
                                           or self.cursor >= self.abort.step - 1)

    def events_until(self, step: int, limit: int) -> list[Event]:
        """The last `limit` events at or before `step` (replay shows history up to the cursor)."""
        end = bisect.bisect_right(self._event_steps, step)
        return self.events[max(0, end - limit):end]

    def next_event(self, step: int, kinds: tuple[str, ...] = JUMP_KINDS) -> Event | None:
        start = bisect.bisect_right(self._event_steps, step)
        for event in self.events[start:]:
            if event.kind in kinds:
                return event
        return None

    def prev_event(self, step: int, kinds: tuple[str, ...] = JUMP_KINDS) -> Event | None:
        end = bisect.bisect_left(self._event_steps, step)
        for event in reversed(self.events[:end]):
            if event.kind in kinds:
                return event
        return None

    def step_at_wall(self, wall_s: float) -> int:
        """The last step that had ended by `wall_s` (replay's 1x pace is the recorded one)."""
        index = bisect.bisect_right(self._column("wall_s"), wall_s) - 1
        return self.first_step + max(0, index)

    def wall_of(self, step: int) -> float:
        s = self.step(step)
        return s.wall_s if s is not None else 0.0

    # -- plotting -------------------------------------------------------------------------

    def series(self, name: str, lo: int, hi: int, points: int) -> tuple[np.ndarray, np.ndarray]:
        """Steps lo..hi (inclusive) of one series, downsampled to at most `points` points.

        Each point covers a bin of steps: counts and percentages take the bin's maximum (so a
        peak right before the abort is not averaged away), token rates are the bin's tokens
        over its simulated seconds. Results for closed ranges are cached, so a replay's
        whole-run plots cost nothing while the cursor moves.
        """
        if name not in SERIES:
            raise KeyError(name)
        first = self.first_step
        a = max(0, lo - first)
        b = min(len(self.steps), hi - first + 1)
        if b <= a:
            return np.empty(0), np.empty(0)
        points = max(1, points)
        key = (name, a, b, points)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        n = b - a
        size = -(-n // points)  # ceil
        nbins = -(-n // size)
        pad = nbins * size - n
        xs = np.arange(a, b, size, dtype=float) + first
        if name.endswith("_tps"):
            tokens = np.asarray(self._column("prompt_tokens" if name == "prompt_tps"
                                             else "generated_tokens")[a:b], dtype=float)
            secs = np.asarray(self._column("sim_step_s")[a:b], dtype=float)
            if pad:
                tokens = np.concatenate([tokens, np.zeros(pad)])
                secs = np.concatenate([secs, np.zeros(pad)])
            t = tokens.reshape(nbins, size).sum(axis=1)
            s = secs.reshape(nbins, size).sum(axis=1)
            ys = np.divide(t, s, out=np.zeros_like(t), where=s > 0)
        else:
            values = np.asarray(self._column(name)[a:b], dtype=float)
            if pad:
                values = np.concatenate([values, np.full(pad, values[-1])])
            ys = values.reshape(nbins, size).max(axis=1)
        result = (xs, ys)
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[key] = result
        return result
