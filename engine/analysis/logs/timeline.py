"""One time axis for a log: seconds since the run's first step.

vLLM's stats lines carry wall-clock timestamps (often without a year); tqdm carries elapsed time
since the progress bar appeared, which is when `LLM.generate` starts stepping. Where both exist,
each tqdm line bounds the bar's start: after a line stamped T_prev, elapsed E means start >=
T_prev - E - 1 (tqdm floors to seconds); before a line stamped T_next, start <= T_next - E.
Time zero is the middle of that interval. Without tqdm, time zero is the first stats window's
start (its timestamp minus vLLM's 5-s interval), which counts any warm-up as running time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Sequence

STATS_INTERVAL_S = 5.0  # vLLM V0's local logging interval (_LOCAL_LOGGING_INTERVAL_SEC)
V1_STATS_INTERVAL_S = 10.0  # V1's default VLLM_LOG_STATS_INTERVAL


def absolute(stamp: tuple | None, year_hint: int = 2000) -> float | None:
    """Seconds since the epoch (naive, year 2000 when the log gives none)."""
    if stamp is None:
        return None
    year, month, day, hour, minute, second, frac = stamp
    try:
        when = datetime(year or year_hint, month, day, hour, minute, second)
    except ValueError:
        return None
    return when.timestamp() + frac


class Timeline:
    """Maps items (in log order) to seconds since the first step."""

    def __init__(self, items: Sequence[tuple[float | None, float | None]],
                 first_stats_abs: float | None, interval_s: float = STATS_INTERVAL_S) -> None:
        """`items`: per item in log order, (absolute time or None, tqdm elapsed or None);
        `interval_s`: the stats logger's interval (the first window's length)."""
        lows: list[float] = []
        highs: list[float] = []
        for i, (_, elapsed) in enumerate(items):
            if elapsed is None:
                continue
            before = next((a for a, _ in reversed(items[:i]) if a is not None), None)
            after = next((a for a, _ in items[i + 1:] if a is not None), None)
            if before is not None:
                lows.append(before - elapsed - 1.0)
            if after is not None:
                highs.append(after - elapsed)
        self.method: str
        if lows or highs:
            low = max(lows) if lows else min(highs) - 1.0
            high = min(highs) if highs else max(lows) + 1.0
            self.zero = (low + high) / 2 if low <= high else low
            self.method = "tqdm start"
            self.uncertainty_s = round(max(0.0, high - low) / 2, 2)
        elif any(e is not None for _, e in items) and all(a is None for a, _ in items):
            self.zero, self.method, self.uncertainty_s = 0.0, "tqdm start", 0.0
        elif first_stats_abs is not None:
            self.zero = first_stats_abs - interval_s
            self.method = "first stats window start"
            self.uncertainty_s = interval_s
        else:
            self.zero = None  # type: ignore[assignment]
            self.method = "none"
            self.uncertainty_s = 0.0

    def at(self, absolute_s: float | None, elapsed_s: float | None) -> float | None:
        if elapsed_s is not None and self.method == "tqdm start":
            return round(elapsed_s, 3)
        if absolute_s is None or self.zero is None:
            return None
        return round(absolute_s - self.zero, 3)
