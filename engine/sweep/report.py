"""`observatory sweep-report DIR`: the rows as a table, and the abort heatmaps.

The terminal form is a rich table of the columns a reader compares (grid keys, abort step, peak
CPU KV, swaps, throughput, TTFT, withheld steps, wall time) plus the heatmaps; `--format csv`
and `json` give every column of every row, `markdown` the table and heatmaps for a README.
"""

from __future__ import annotations

import io
from typing import Any

import msgspec

from engine.kinds import newest_of
from engine.safe_text import safe
from engine.sweep import heatmap as heat
from engine.sweep.rows import columns
from engine.sweep.store import SweepDir, SweepSpec, rows_to_csv

# (column, header) for the terminal and markdown tables, after the grid keys.
TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("status", "status"),
    ("end_reason", "end"),
    ("abort_step", "abort step"),
    ("peak_cpu_kv_pct", "peak CPU KV %"),
    ("peak_swapped", "peak swapped"),
    ("swap_outs", "swap-outs"),
    ("swap_ins", "swap-ins"),
    ("throughput_tok_s", "gen tok/s (sim)"),
    ("ttft_mean_s", "TTFT mean s"),
    ("ttft_p99_s", "TTFT p99 s"),
    ("prefill_blocked_steps", "withheld steps"),
    ("wall_seconds", "wall s"),
)
V1_TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("status", "status"),
    ("end_reason", "end"),
    ("finished_requests", "finished"),
    ("preemptions", "preemptions"),
    ("max_preemptions_per_request", "most of one req"),
    ("recompute_tax", "recompute tax"),
    ("throughput_tok_s", "gen tok/s (sim)"),
    ("ttft_mean_s", "TTFT mean s"),
    ("ttft_p99_s", "TTFT p99 s"),
    ("admission_withheld_steps", "withheld steps"),
    ("wall_seconds", "wall s"),
)
"""A sweep on vLLM's V1 engine: no swap space; its thrash is recompute."""


TABLE_COLUMNS_OF = {"v0": TABLE_COLUMNS, "v1": V1_TABLE_COLUMNS}


def engine_of(rows: list[dict[str, Any]]) -> str:
    """The kind whose vocabulary the sweep's rows are read in: "v1" when any came from the V1
    engine."""
    return newest_of(row.get("engine") for row in rows).name


def table_columns(rows: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    return TABLE_COLUMNS_OF[engine_of(rows)]


class Report(msgspec.Struct):
    spec: SweepSpec
    rows: list[dict[str, Any]]  # one per finished cell, in grid order
    bad_lines: int  # unreadable lines in results.jsonl
    stale_rows: int  # rows whose key matches no cell of sweep.toml (an edited spec)
    total_cells: int


def load(directory: str) -> Report:
    """Read a sweep directory (finished, interrupted or still running)."""
    from engine.sweep.grid import expand

    store = SweepDir(directory)
    spec = store.read_spec()
    keys = {cell.key for cell in expand(spec.base, spec.axes)}
    by_key, bad = store.read_rows()
    rows = sorted((row for key, row in by_key.items() if key in keys),
                  key=lambda r: int(r.get("cell", 0)))
    return Report(spec=spec, rows=rows, bad_lines=bad, stale_rows=len(by_key) - len(rows),
                  total_cells=len(keys))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return safe(value)  # a row's strings come from results.jsonl: no control characters


def _table_cells(report: Report, terminal: bool = False) -> tuple[list[str], list[list[str]]]:
    """The table's headers and rows; on a terminal (80 columns) without the status column when
    every row is ok (the footer says so)."""
    keys = [a.key for a in report.spec.axes]
    shown = table_columns(report.rows)
    if terminal and all(row.get("status") == "ok" for row in report.rows):
        shown = tuple(c for c in shown if c[0] != "status")
    headers = [*keys, *(h for _, h in shown)]
    body = []
    for row in report.rows:
        cells = [_cell(row.get(k)) for k in keys]
        if row.get("status") == "failed":
            cells += ["failed", safe(row.get("message") or "")]
        else:
            cells += [_cell(row.get(c)) for c, _ in shown]
        body.append(cells)
    return headers, body


def _footer(report: Report) -> str:
    failed = sum(1 for r in report.rows if r.get("status") == "failed")
    aborted = sum(1 for r in report.rows if r.get("aborted"))
    text = (f"{len(report.rows)} of {report.total_cells} cells have rows: {aborted} aborted, "
            f"{failed} failed")
    if report.bad_lines:
        text += f"; {report.bad_lines} unreadable line(s) in results.jsonl skipped"
    if report.stale_rows:
        text += f"; {report.stale_rows} row(s) matching no cell of sweep.toml left out"
    return text


def render_terminal(report: Report, color: bool | None = None, width: int | None = None) -> str:
    """Table, heatmaps and a footer, as text (ANSI colours when `color`), fitted to `width`
    (default: the terminal's, 80 without one: engine.widths): a table too wide for it is
    printed in blocks of columns, each starting with the grid keys."""
    from rich.console import Console
    from rich.markup import escape

    from engine.widths import rich_blocks, terminal_width, two_lines

    out = io.StringIO()
    if width is None:
        width = terminal_width()
    console = Console(file=out, width=width, force_terminal=bool(color),
                      color_system="standard" if color else None, highlight=False)
    headers, body = _table_cells(report, terminal=True)
    n_keys = len(report.spec.axes)
    justify = ["left" if i < n_keys or header == "end" else "right"
               for i, header in enumerate(headers)]
    rows = [[escape(c) for c in cells[:len(headers)]] for cells in body]  # not markup
    styles = ["red" if cells[n_keys] == "failed" else None for cells in body]
    tables = rich_blocks(f"sweep {report.spec.base.preset}: {len(report.rows)} cells",
                         [two_lines(h) for h in headers], rows, n_keys, width, justify,
                         console, styles)
    for k, (title, table) in enumerate(tables):
        if k:
            console.print()
        console.print(title, overflow="fold")
        console.print(table)
    maps = heat.heatmaps(report.spec.axes, report.rows)
    for heatmap in maps:
        for title, table in heat.rich_tables(heatmap, width, console):
            console.print()
            console.print(title, overflow="fold")
            console.print(table)
    console.print()
    if maps:
        console.print(heat.LEGEND)
    else:
        console.print(heat.why_no_heatmap(report.spec.axes))
    console.print(_footer(report))
    text = out.getvalue()
    if not color:  # rich pads titles to the table's width; a file or a README wants no padding
        text = "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
    return text


def render_markdown(report: Report) -> str:
    headers, body = _table_cells(report)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for cells in body:
        padded = cells + [""] * (len(headers) - len(cells))
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in padded) + " |")
    parts = ["\n".join(lines)]
    maps = heat.heatmaps(report.spec.axes, report.rows)
    parts += [heat.markdown(m) for m in maps]
    parts.append(heat.LEGEND if maps else heat.why_no_heatmap(report.spec.axes))
    parts.append(_footer(report))
    return "\n\n".join(parts) + "\n"


def render(report: Report, fmt: str, color: bool | None = None) -> str:
    all_columns = columns([a.key for a in report.spec.axes], engine_of(report.rows))
    if fmt == "csv":
        return rows_to_csv(report.rows, all_columns)
    if fmt == "json":
        ordered = [{c: row.get(c) for c in all_columns} for row in report.rows]
        return msgspec.json.format(msgspec.json.encode(ordered), indent=2).decode() + "\n"
    if fmt == "markdown":
        return render_markdown(report)
    return render_terminal(report, color=color)
