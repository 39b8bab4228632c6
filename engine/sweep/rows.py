"""One result row per cell: the grid keys, then the status, the full summary, throughput and
TTFT, and the timings. Rows are flat dicts so `results.csv` and `results.jsonl` hold the same
columns and pandas, jq or a spreadsheet read them without the observatory.

The volatile columns (`VOLATILE_COLUMNS`: wall-clock timings, how many attempts the cell took and
which Ray node ran it) are the only ones that may differ between two runs of the same cell: sim runs are pure functions
of their spec.
"""

from __future__ import annotations

from typing import Any

from engine.analysis.summary import Summary, V1Summary
from engine.kinds import kind_of
from engine.sweep.cell import CellOutcome, Latency
from engine.sweep.grid import Cell

HEAD_COLUMNS = ("cell", "key")
STATUS_COLUMNS = ("status", "message")
# Sweeps run on the sim only, so the summary's time axis is always "sim" and its measured
# executor time is machine noise: neither belongs in a row that must reproduce exactly.
# `trace` is left out: the trace's rows as a struct, not a cell's value (the trace a cell ran
# is its `trace` setting, a grid column)
SUMMARY_COLUMNS = tuple(f for f in Summary.__struct_fields__
                        if f not in ("time_axis", "exec_seconds", "trace"))
LATENCY_COLUMNS = tuple(Latency.__struct_fields__)
TAIL_COLUMNS = ("engine_start_s", "import_s", "cell_s", "cpu_s", "attempts", "node", "recording")
VOLATILE_COLUMNS = frozenset({"wall_seconds", "engine_start_s", "import_s", "cell_s", "cpu_s",
                              "attempts", "node"})
RESULT_COLUMNS = STATUS_COLUMNS + SUMMARY_COLUMNS + LATENCY_COLUMNS + TAIL_COLUMNS
# A V1 engine's cells (vLLM 0.33: no swap space, recompute preemptions) add the V1 summary's own
# fields, after the others; the V0 names they share are filled where V1 has them.
V1_SUMMARY_COLUMNS = tuple(f for f in V1Summary.__struct_fields__
                           if f not in Summary.__struct_fields__
                           and f not in ("time_axis", "exec_seconds", "trace"))
EXTRA_COLUMNS: dict[str, tuple[str, ...]] = {"v0": (), "v1": V1_SUMMARY_COLUMNS}


def columns(grid_keys: list[str], engine: str = "v0") -> list[str]:
    """Every column of a sweep whose grid keys are `grid_keys`, in file order (a sweep on the
    V1 engine has V1's summary columns too)."""
    extra = EXTRA_COLUMNS[kind_of(engine).name]
    return [*HEAD_COLUMNS, *grid_keys, *RESULT_COLUMNS, *extra]


def make_row(cell: Cell, outcome: CellOutcome, recording: str | None) -> dict[str, Any]:
    """The row for `cell`; metrics are None when the cell failed."""
    row: dict[str, Any] = {"cell": cell.index, "key": cell.key}
    row.update(cell.params)
    row["status"] = outcome.status
    row["message"] = outcome.message
    summary = outcome.summary if outcome.summary is not None else outcome.v1_summary
    for name in SUMMARY_COLUMNS:  # a V1 summary lacks V0's swap counts: None
        row[name] = getattr(summary, name, None) if summary is not None else None
    for name in LATENCY_COLUMNS:
        row[name] = getattr(outcome.latency, name) if outcome.latency is not None else None
    row["engine_start_s"] = outcome.engine_start_s
    row["import_s"] = outcome.import_s
    row["cell_s"] = outcome.cell_s
    row["cpu_s"] = outcome.cpu_s
    row["attempts"] = outcome.attempts
    row["node"] = outcome.node
    row["recording"] = recording
    if outcome.v1_summary is not None:
        for name in V1_SUMMARY_COLUMNS:
            row[name] = getattr(outcome.v1_summary, name)
    return row


def deterministic_part(row: dict[str, Any]) -> dict[str, Any]:
    """The part of a row that must be identical wherever and however often the cell runs."""
    return {k: v for k, v in row.items() if k not in VOLATILE_COLUMNS}
