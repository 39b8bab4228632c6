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


class Recorded:
    """What a row taken from a recording adds to a trace's lengths (engine.traces.recording, and
    the observatory's own fields in a Mooncake line: engine.traces.mooncake), so that a re-run
    makes the recorded engine's decisions: the request's id, the step it arrived before, its
    samples, its output limit, the output length of each sample the recording saw end, and its
    prompt's blocks (engine.fingerprint's numbers, `block_size` tokens each, the last one
    partial). Any of them may be None: the row's plain fields then decide."""

    __slots__ = ("request_id", "step", "n", "max_tokens", "output_lens", "block_ids",
                 "block_size")

    def __init__(self, request_id: str | None = None, step: int | None = None,
                 n: int | None = None, max_tokens: int | None = None,
                 output_lens: list[int] | None = None, block_ids: list[int] | None = None,
                 block_size: int | None = None) -> None:
        self.request_id = request_id
        self.step = step
        self.n = n
        self.max_tokens = max_tokens
        self.output_lens = output_lens
        self.block_ids = block_ids
        self.block_size = block_size


class TraceRow:
    """One request of a trace as its file gives it. `time_s` is the file's own clock in
    seconds (ms / 1000, a date-time's epoch seconds, ...): source.py makes it relative."""

    __slots__ = ("line", "time_s", "input_len", "output_len", "hash_ids", "recorded")

    def __init__(self, line: int, time_s: float, input_len: int, output_len: int,
                 hash_ids: list[int] | None = None, recorded: Recorded | None = None) -> None:
        self.line = line
        self.time_s = time_s
        self.input_len = input_len
        self.output_len = output_len
        self.hash_ids = hash_ids
        self.recorded = recorded


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
