"""The driver's loop: plan which cells still need a row, run them, and write each row the moment
it arrives (so Ctrl-C, a kill or a lost driver never loses a finished cell).

`plan` decides what to run from the grid and what `results.jsonl` already holds; `collect`
consumes outcomes from any executor (Ray, or this process one by one) and owns the writing.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

from engine.sweep.cell import CellOutcome
from engine.sweep.grid import Cell
from engine.sweep.progress import SweepProgress
from engine.sweep.rows import columns, make_row
from engine.sweep.store import SweepDir

CSV_INTERVAL_S = 2.0  # the CSV is rewritten at most this often while the sweep runs


def plan(cells: list[Cell], existing: dict[str, dict[str, Any]],
         retry_failed: bool = False) -> list[Cell]:
    """Cells without a row (with `retry_failed`, also cells whose row says failed)."""
    def done(cell: Cell) -> bool:
        row = existing.get(cell.key)
        return row is not None and not (retry_failed and row.get("status") == "failed")

    return [cell for cell in cells if not done(cell)]


def recording_name(cell: Cell) -> str:
    return f"{cell.index:04d}-{cell.key}.jsonl.zst"


class Collector:
    """Writes rows as outcomes arrive and keeps the CSV current."""

    def __init__(self, store: SweepDir, grid_keys: list[str], cells: list[Cell],
                 rows: dict[str, dict[str, Any]], progress: SweepProgress) -> None:
        self.store = store
        from engine.adapters.versions import installed_engine

        self.columns = columns(grid_keys, installed_engine())  # cells run the installed vLLM
        self.cell_keys = {cell.key for cell in cells}
        self.rows = rows  # key -> row, existing rows included
        self.progress = progress
        self._csv_at = time.monotonic()

    def consume(self, outcomes: Iterator[tuple[Cell, CellOutcome] | None]) -> None:
        for item in outcomes:
            if item is None:
                self.progress.tick()
                continue
            self.add(*item)

    def add(self, cell: Cell, outcome: CellOutcome) -> dict[str, Any]:
        recording = None
        if outcome.recording is not None:
            recording = self.store.write_recording(recording_name(cell), outcome.recording)
        row = make_row(cell, outcome, recording)
        self.store.append_row(row)
        self.rows[cell.key] = row
        self.progress.advance(failed=outcome.status == "failed")
        if time.monotonic() - self._csv_at >= CSV_INTERVAL_S:
            self.write_csv()
        return row

    def write_csv(self) -> None:
        self._csv_at = time.monotonic()
        current = [row for key, row in self.rows.items() if key in self.cell_keys]
        ordered = sorted(current, key=lambda r: int(r.get("cell", 0)))
        self.store.write_csv(ordered, self.columns)
