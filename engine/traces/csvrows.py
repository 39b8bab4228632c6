"""CSV traces (Azure, BurstGPT): the header row names the columns, and each reader asks for
the ones it needs by name, so column order and extra columns (BurstGPT's Session ID and Elapsed
time) do not matter. Physical line numbers come from the csv module (a quoted cell may span
lines)."""

from __future__ import annotations

import csv
from typing import Iterator, TextIO

from engine.traces.rows import BadRow, TraceError


def read(stream: TextIO, where: str, wanted: dict[str, str]
         ) -> Iterator[tuple[int, dict[str, str]] | BadRow]:
    """(line number, {key: cell}) for each data row, `wanted` mapping a key to the header's
    column name (matched without case or surrounding spaces); a short row is a BadRow."""
    reader = csv.reader(stream)
    try:
        header = next(reader)
    except StopIteration:
        raise TraceError(f"{where}: the file is empty: a trace needs a header row and one "
                         f"request a row", line=1) from None
    names = [cell.strip().lower() for cell in header]
    index: dict[str, int] = {}
    for key, column in wanted.items():
        try:
            index[key] = names.index(column.lower())
        except ValueError:
            shown = ",".join(h.strip() for h in header)[:60]
            raise TraceError(f"{where}: line 1: no {column!r} column (the header is "
                             f"{ascii(shown)}): is --trace-format right?", line=1) from None
    width = max(index.values()) + 1
    for row in reader:
        line = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) < width:
            yield BadRow(line, f"{len(row)} columns where the header has {len(header)} (a cut "
                               f"line?)")
            continue
        yield line, {key: row[i] for key, i in index.items()}
