"""What every trace reader yields, and the one error they raise.

A reader knows its format only: it turns each line into a `TraceRow` (raw time in seconds,
lengths as the file gives them) or raises `TraceError` naming the line. The checks that do not
depend on the format (negative lengths, time going backwards, the model's context) are
engine.traces.source's, so every format refuses the same things in the same words.
"""

from __future__ import annotations

from engine.errors import ConfigError

BLOCK_TOKENS = 512
"""Tokens per Mooncake hash_ids block (the trace's own block size, not the engine's)."""


class TraceError(ConfigError):
    """A trace that cannot be replayed: one line naming the file, the line and the fix.
    `line` is None for a fault of the whole file (empty, unknown format, changed sha256)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


class BadRow(Exception):
    """One line of a trace that is wrong (a reader's internal signal): the source turns it into
    a TraceError naming the file, or skips it with --trace-skip-bad."""

    def __init__(self, line: int, what: str) -> None:
        super().__init__(what)
        self.line = line
        self.what = what


class TraceRow:
    """One request of a trace as its file gives it. `time_s` is the file's own clock in
    seconds (ms / 1000, a date-time's epoch seconds, ...): source.py makes it relative."""

    __slots__ = ("line", "time_s", "input_len", "output_len", "hash_ids")

    def __init__(self, line: int, time_s: float, input_len: int, output_len: int,
                 hash_ids: list[int] | None = None) -> None:
        self.line = line
        self.time_s = time_s
        self.input_len = input_len
        self.output_len = output_len
        self.hash_ids = hash_ids


def as_int(text: str, line: int, column: str) -> int:
    """A CSV cell that must be a whole number of tokens ("12", "12.0"): else BadRow."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise BadRow(line, f"{column} is {text.strip()[:40]!r}, not a number") from None
    if not value.is_integer():
        raise BadRow(line, f"{column} is {text.strip()[:40]!r}, not a whole number of tokens")
    return int(value)


def as_float(text: str, line: int, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadRow(line, f"{column} is {text.strip()[:40]!r}, not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise BadRow(line, f"{column} is {text.strip()[:40]!r}, not a finite number")
    return value
