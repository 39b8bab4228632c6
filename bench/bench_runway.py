"""How good is the swap-runway forecast (engine/analysis/runway.py)? Measured on recordings that
aborted: at h steps before the abort, the forecast should say "about h steps".

For every recording given (default: the shipped recordings/*.jsonl.zst; those that did not abort
are skipped) it prints the forecast made h = 25, 50, 100, 200 steps before the abort, then the
median and the largest absolute error in steps over all of them. A forecast of "not filling"
(the swap space was not growing yet) counts as a miss and is shown as "-".

Usage: PYTHONPATH=. python bench/bench_runway.py [RECORDING ...]
"""

from __future__ import annotations

import glob
import statistics
import sys
from pathlib import Path

from engine.analysis.runway import forecast, latest_change
from engine.stream.reader import load

HORIZONS = (25, 50, 100, 200)


def forecasts(path: str) -> tuple[int, dict[int, float | None]] | None:
    """(abort step, {h: forecast made h steps before it}) or None if the run did not abort."""
    recording = load(path)
    if recording.abort is None or not recording.steps:
        return None
    steps, abort = recording.steps, recording.abort.step
    made: dict[int, float | None] = {}
    for h in HORIZONS:
        end = abort - h - steps[0].step + 1  # the forecast is made after step abort - h
        if 2 <= end <= len(steps):
            change = latest_change(recording.policy_changes, abort - h)
            runway = forecast(steps, end, changed_at=change.step if change else None)
            made[h] = runway.steps if runway is not None else None
    return abort, made


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[1]
    paths = argv or sorted(glob.glob(str(root / "recordings" / "*.jsonl.zst")))
    errors: dict[int, list[float]] = {h: [] for h in HORIZONS}
    misses: dict[int, int] = {h: 0 for h in HORIZONS}
    print(f"{'recording':44} {'abort':>6}  " + "  ".join(f"h={h:<4}" for h in HORIZONS))
    for path in paths:
        result = forecasts(path)
        if result is None:
            print(f"{Path(path).name:44} {'-':>6}  (did not abort: skipped)")
            continue
        abort, made = result
        cells = []
        for h in HORIZONS:
            if h not in made:
                cells.append(f"{'':6}")
                continue
            value = made[h]
            if value is None:
                misses[h] += 1
                cells.append(f"{'-':6}")
            else:
                errors[h].append(abs(value - h))
                cells.append(f"{value:6.0f}")
        print(f"{Path(path).name:44} {abort:6}  " + "  ".join(cells))
    print()
    print("forecast error in steps (|forecast - steps that actually remained|):")
    for h in HORIZONS:
        found = errors[h]
        if found:
            print(f"  {h:3} steps before the abort: median {statistics.median(found):5.0f}, "
                  f"max {max(found):5.0f}  ({len(found)} runs, {misses[h]} not filling yet)")
        else:
            print(f"  {h:3} steps before the abort: no forecast ({misses[h]} not filling yet)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
