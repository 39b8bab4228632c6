"""A sweep's cells in a sortable table; Enter replays the chosen cell's recording.

The rows come from the sweep directory (engine.sweep.report.load), so the screen works on a
finished sweep, an interrupted one and one that is still running (`r` reloads). `s` sorts by the
column under the cursor (again: descending), as does a click on a column's header. Missing
values (a failed cell has no metrics) sort last either way.

Enter opens the cell's recording on the replay screen when the sweep kept it (--record-cells);
`q` there comes back to the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from engine.errors import ObservatoryError
from engine.sweep.report import Report, load, table_columns
from tui.replay.replay_screen import ReplayScreen


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def sort_key(value: Any) -> tuple:
    """Missing values last; numbers by value; everything else by its text."""
    if value is None:
        return (2, 0, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value, "")
    return (1, 0, str(value))


class CellReplayScreen(ReplayScreen):
    """The lead's replay screen, with `q` going back to the sweep instead of quitting.

    Its BINDINGS are the replay screen's with `q` replaced in its place: `?` lists
    `self.BINDINGS`, and with only the `q` binding here it listed `q` alone."""

    BINDINGS = [Binding("q", "back", "back to cells") if b.key == "q" else b
                for b in ReplayScreen.BINDINGS]

    def action_back(self) -> None:
        self.app.pop_screen()


class SweepScreen(Screen):
    BINDINGS = [
        # priority: the focused DataTable's own enter (hidden) shadowed this one, so the footer
        # never said how to open a cell
        Binding("enter", "open", "replay cell", show=True, priority=True),
        Binding("s", "sort", "sort by column"),
        Binding("r", "reload", "reload"),
        Binding("q", "quit", "quit"),
    ]
    DEFAULT_CSS = """
    SweepScreen #sweep-title {
        height: 1;
        padding: 0 1;
        background: $boost;
        text-style: bold;
    }
    SweepScreen DataTable {
        height: 1fr;
    }
    """

    sort_column: reactive[str | None] = reactive(None)
    sort_descending: reactive[bool] = reactive(False)

    def __init__(self, directory: str, report: Report) -> None:
        super().__init__()
        self.directory = Path(directory)
        self.report = report
        self.column_keys: list[str] = [a.key for a in report.spec.axes]
        shown = table_columns(report.rows)  # V1's own columns for a sweep on the V1 engine
        self.column_keys += [name for name, _ in shown] + ["recording"]
        self.headers = [a.key for a in report.spec.axes]
        self.headers += [header for _, header in shown] + ["rec"]

    def compose(self) -> ComposeResult:
        yield Static(id="sweep-title")
        yield DataTable(id="cells", cursor_type="cell", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, header in zip(self.column_keys, self.headers):
            table.add_column(header, key=key)
        self.fill()
        table.focus()

    # ---- drawing ------------------------------------------------------------------------
    def ordered_rows(self) -> list[dict[str, Any]]:
        rows = list(self.report.rows)
        column = self.sort_column
        if column is None:
            return rows
        present = [r for r in rows if r.get(column) is not None]
        missing = [r for r in rows if r.get(column) is None]
        present.sort(key=lambda r: sort_key(r.get(column)), reverse=self.sort_descending)
        return present + missing

    def fill(self) -> None:
        table = self.query_one(DataTable)
        cursor = table.cursor_coordinate
        table.clear()
        for row in self.ordered_rows():
            cells = []
            for key in self.column_keys:
                if key == "recording":
                    cells.append("✓" if row.get("recording") else "")
                elif key == "end_reason" and row.get("status") == "failed":
                    cells.append(str(row.get("message") or ""))
                else:
                    cells.append(_text(row.get(key)))
            table.add_row(*cells, key=row["key"])
        if table.row_count:
            table.cursor_coordinate = table.validate_cursor_coordinate(cursor)
        self.query_one("#sweep-title", Static).update(self.title_text())

    def title_text(self) -> str:
        rows = self.report.rows
        aborted = sum(1 for r in rows if r.get("aborted"))
        failed = sum(1 for r in rows if r.get("status") == "failed")
        order = ""
        if self.sort_column is not None:
            order = f"  sorted by {self.sort_column} {'↓' if self.sort_descending else '↑'}"
        return (f"sweep {self.directory}: {len(rows)} of {self.report.total_cells} cells, "
                f"{aborted} aborted, {failed} failed{order}")

    def watch_sort_column(self) -> None:
        if self.is_mounted:
            self.fill()

    def watch_sort_descending(self) -> None:
        if self.is_mounted:
            self.fill()

    # ---- actions ------------------------------------------------------------------------
    def sort_by(self, column: str) -> None:
        if column == self.sort_column:
            self.sort_descending = not self.sort_descending
        else:
            self.sort_descending = False
            self.sort_column = column

    def action_sort(self) -> None:
        table = self.query_one(DataTable)
        self.sort_by(self.column_keys[table.cursor_column])

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.sort_by(str(event.column_key.value))

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        self.open_row(str(event.cell_key.row_key.value))

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if table.row_count:
            row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
            self.open_row(str(row_key.value))

    def open_row(self, key: str) -> None:
        from tui.run_source import load_view

        row = next((r for r in self.report.rows if r["key"] == key), None)
        if row is None:
            return
        if row.get("status") == "failed":
            self.notify(str(row.get("message")), title=f"cell {row['cell']} failed",
                        severity="error", timeout=8)
            return
        if not row.get("recording"):
            self.notify("this cell's recording was not kept: run the sweep with --record-cells",
                        title=f"cell {row['cell']}", severity="warning", timeout=6)
            return
        path = self.directory / row["recording"]
        try:
            view, notice = load_view(str(path))
        except ObservatoryError as exc:
            self.notify(str(exc), title="cannot replay", severity="error", timeout=8)
            return
        where = ", ".join(f"{a.key}={row.get(a.key)}" for a in self.report.spec.axes)
        self.app.push_screen(CellReplayScreen(view, title=f"cell {row['cell']}: {where}",
                                              autoplay=False, notice=notice))

    def action_reload(self) -> None:
        try:
            self.report = load(str(self.directory))
        except ObservatoryError as exc:
            self.notify(str(exc), title="reload", severity="error")
            return
        self.fill()

    def action_quit(self) -> None:
        self.app.exit(0)
