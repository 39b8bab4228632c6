"""Tables that fit the terminal: every table a headless command prints is at most as wide as
the terminal (COLUMNS, else the terminal's own width, else 80 for a pipe or a file), and is
never wrapped or cut to get there.

A table too wide for that is printed in blocks of its columns: the first `keep` columns (the
row labels, a sweep's grid keys) start every block, and the others follow in their order, as
many as fit, then the next block below. `compare`, `sweep-report` and its heatmaps use it;
tests/test_widths.py runs every table-printing command at 80 columns and measures the lines.
"""

from __future__ import annotations

import shutil
from typing import Any, Sequence

DEFAULT_WIDTH = 80


def terminal_width() -> int:
    """The width to fit: COLUMNS, else the terminal's, else DEFAULT_WIDTH."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def wrapped(text: str, indent: int = 0, width: int | None = None) -> str:
    """A sentence of command output wrapped at words to `width` (default the terminal's, 80
    without one), its continuation lines indented by `indent`: prose fits as tables do."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width or terminal_width(), break_long_words=False,
                                    break_on_hyphens=False, subsequent_indent=" " * indent))


def two_lines(header: str, most: int = 9) -> str:
    """A header longer than `most` broken at the space nearest its middle ("gen tok/s\\n(sim)"),
    so a column of short numbers is not as wide as its words."""
    if len(header) <= most or " " not in header:
        return header
    middle = len(header) / 2
    cut = min((i for i, c in enumerate(header) if c == " "), key=lambda i: abs(i - middle))
    return header[:cut] + "\n" + header[cut + 1:]


def rich_blocks(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]], keep: int,
                width: int | None, justify: Sequence[str], console: Any,
                styles: Sequence[str | None] | None = None) -> list[tuple[str, Any]]:
    """(title, rich Table) per block of columns that fits `width`, measured by rich itself;
    the title names the block when there is more than one ("(columns 2 of 2)"). Titles are
    the caller's to print, as a line of their own: rich would wrap one wider than its table."""
    from rich import box
    from rich.measure import Measurement
    from rich.table import Table

    def table(columns: list[int], name: str | None) -> Any:
        t = Table(title=name, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                  padding=(0, 1))
        for i in columns:
            t.add_column(headers[i], justify=justify[i], no_wrap=True)
        for n, row in enumerate(rows):
            t.add_row(*(row[i] if i < len(row) else "" for i in columns),
                      style=styles[n] if styles else None)
        return t

    unbounded = console.options.update(max_width=1 << 16)  # else rich caps it at `width`

    def measured(columns: list[int]) -> int:
        return Measurement.get(console, unbounded, table(columns, "")).maximum

    kept = list(range(min(keep, len(headers))))
    blocks: list[list[int]] = []
    current = list(kept)
    for i in range(len(kept), len(headers)):
        if width is not None and len(current) > len(kept) and measured([*current, i]) > width:
            blocks.append(current)
            current = list(kept)
        current.append(i)
    if len(current) > len(kept) or not blocks:
        blocks.append(current)
    names = [title if len(blocks) == 1 else f"{title} (columns {k + 1} of {len(blocks)})"
             for k in range(len(blocks))]
    return [(name, table(b, None)) for b, name in zip(blocks, names)]
