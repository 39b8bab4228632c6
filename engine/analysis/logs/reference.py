"""A reference recording (a real log, imported) laid over a run's plots.

The run's plots are over steps; the log is over time. Both count time from the first step (the
log through its tqdm estimate, see timeline.py), so a log window at `t_s` lands on the first
step whose simulated time reaches `t_s + offset_s`. The offset is for a log whose clock is
known to be off, e.g. by a warm-up in its first window. Windows past the run's end are not
drawn: the overlay never extends a run.

A V1 log (header `engine: "v1"`) has no swap queue; its `Waiting:` queue is drawn instead. With
several data-parallel engines in one log, one engine's series is drawn: `engine` (default the
lowest index, -1 for the log's `N Engines Aggregated` line).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from engine.errors import RecordingError
from engine.kinds import kind_of
from engine.stream.records import LogWindow

SERIES_FIELDS = {"gpu_pct": "gpu_pct", "cpu_pct": "cpu_pct", "running": "running",
                 "swapped": "swapped", "waiting": "pending", "prompt_tps": "prompt_tps",
                 "gen_tps": "gen_tps"}
"""Run series name -> LogWindow field (a V0 log's; V1_SERIES_FIELDS for a V1 log's)."""
V1_SERIES_FIELDS = {**SERIES_FIELDS, "waiting": "waiting"}
"""V1 logs `Waiting:` where V0 logged `Pending:`."""
SERIES_FIELDS_OF = {"v0": SERIES_FIELDS, "v1": V1_SERIES_FIELDS}


class Reference:
    def __init__(self, windows: Sequence[LogWindow], name: str, offset_s: float = 0.0,
                 kind: str = "v0", engine: int | None = None) -> None:
        engines = sorted({w.engine for w in windows if w.engine is not None})
        if engine is None and engines:
            engine = min((e for e in engines if e >= 0), default=engines[0])
        if engine is not None and engine not in engines:
            raise RecordingError(f"{name}: the log has no engine {engine} (it has "
                                 f"{', '.join(map(str, engines)) or 'none'}); pick one of those")
        self.engines = engines
        self.engine = engine
        self.windows = [w for w in windows if w.t_s is not None
                        and (engine is None or w.engine == engine)]
        self.name = name
        self.offset_s = offset_s
        self.kind = kind_of(kind)  # a V1 log: `waiting` is drawn, there is no swap queue
        self._fields = SERIES_FIELDS_OF[self.kind.name]

    @classmethod
    def load(cls, path: str, offset_s: float = 0.0, engine: int | None = None) -> "Reference":
        from engine.stream.reader import display_name, load

        recording = load(path)
        windows = [item for item in recording.items if isinstance(item, LogWindow)]
        if not windows:
            raise RecordingError(f"{path}: not a reference recording (no stats windows); make one "
                              f"from a vLLM log with `observatory import-log LOG -o REF`")
        return cls(windows, display_name(path), offset_s, kind=recording.header.engine,
                   engine=engine)

    def has(self, name: str) -> bool:
        """Whether the log has any value for the run series `name` (a V1 log has no swap)."""
        field = self._fields.get(name)
        return field is not None and any(getattr(w, field) is not None for w in self.windows)

    def series(self, name: str, sim_s: Sequence[float], first_step: int, lo: int, hi: int
               ) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of the log's `name` within steps lo..hi of a run whose steps have
        simulated end times `sim_s` (first_step onwards)."""
        field = self._fields[name]
        times = np.asarray(sim_s, dtype=float)
        xs, ys = [], []
        for window in self.windows:
            value = getattr(window, field)
            if value is None:
                continue
            i = int(np.searchsorted(times, window.t_s + self.offset_s))
            if i >= len(times):
                break
            step = first_step + i
            if lo <= step <= hi:
                xs.append(step)
                ys.append(float(value))
        return np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
