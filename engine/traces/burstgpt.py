"""BurstGPT traces: CSV `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`
with Timestamp in seconds from the trace's start; the later release adds `Session ID` and
`Elapsed time`. Columns are found by name, so both read alike; Model, Total tokens, Log Type
and the session columns do not change what the scheduler sees and are not read.
"""

from __future__ import annotations

from typing import Iterator, TextIO

from engine.traces import csvrows
from engine.traces.rows import BadRow, TraceRow, as_float, as_int

COLUMNS = {"time": "Timestamp", "input": "Request tokens", "output": "Response tokens"}


def rows(stream: TextIO, where: str) -> Iterator[TraceRow | BadRow]:
    for item in csvrows.read(stream, where, COLUMNS):
        if isinstance(item, BadRow):
            yield item
            continue
        line, cells = item
        try:
            yield TraceRow(line, as_float(cells["time"], line, "Timestamp"),
                           as_int(cells["input"], line, "Request tokens"),
                           as_int(cells["output"], line, "Response tokens"))
        except BadRow as bad:
            yield bad
