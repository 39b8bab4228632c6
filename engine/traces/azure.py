"""Azure LLM inference traces (2023, 2024): CSV `TIMESTAMP,ContextTokens,GeneratedTokens`.

The timestamp is a wall date-time ("2023-11-16 18:15:46.6805900", or with "+00:00"); the run
starts at the first row's. Python's datetime takes at most 6 fractional digits, so the 7 of
the 2023 release are cut to microseconds (100 ns are far below a scheduler step).
"""

from __future__ import annotations

import datetime as _dt
from typing import Iterator, TextIO

from engine.traces import csvrows
from engine.traces.rows import BadRow, TraceRow, as_int

COLUMNS = {"time": "TIMESTAMP", "input": "ContextTokens", "output": "GeneratedTokens"}


def parse_time(text: str) -> float:
    """A date-time cell as epoch seconds (naive ones read as UTC). ValueError if it is not."""
    text = text.strip()
    head, dot, rest = text.partition(".")
    if dot:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        rest = rest[:min(digits, 6)] + rest[digits:]
        text = head + dot + rest
    stamp = _dt.datetime.fromisoformat(text)
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=_dt.timezone.utc)
    return stamp.timestamp()


def rows(stream: TextIO, where: str) -> Iterator[TraceRow | BadRow]:
    for item in csvrows.read(stream, where, COLUMNS):
        if isinstance(item, BadRow):
            yield item
            continue
        line, cells = item
        try:
            time_s = parse_time(cells["time"])
        except ValueError:
            yield BadRow(line, f"TIMESTAMP is {cells['time'].strip()[:40]!r}, not a date-time "
                               f"(e.g. 2023-11-16 18:15:46.6805900)")
            continue
        try:
            yield TraceRow(line, time_s, as_int(cells["input"], line, "ContextTokens"),
                           as_int(cells["output"], line, "GeneratedTokens"))
        except BadRow as bad:
            yield bad
