"""A recording's lines, decoded: the one place that turns bytes into records for every mode of
the reader (engine.stream.reader).

A line is the header (the first), a record of the run (engine.stream.records' union, decoded by
its one decoder, `records.decode_record`), or one of the recorder's own lines: a Check that
seals the lines before it, the Tally and the Index it writes at close. They are told apart by
their first bytes (`CHECK_PREFIX`...), which the recorder writes in this exact form.

Nothing in a file is ever executed: lines decode into typed Structs whose fields carry bounds,
and a header is checked for its `kind` and `schema` before the rest is decoded, so a newer
schema is reported as such rather than as whatever field it changed.
"""

from __future__ import annotations

import os
import zlib

import msgspec

from engine.errors import RecordingError
from engine.stream import limits
from engine.stream.records import SCHEMA_VERSION, Check, Header, Index, Record, Tally
from engine.stream.records import decode_record as decode_record

CHECK_PREFIX = b'{"kind":"check"'
INDEX_PREFIX = b'{"kind":"index"'
TALLY_PREFIX = b'{"kind":"tally"'
RECORDER_LINES = (CHECK_PREFIX, INDEX_PREFIX, TALLY_PREFIX)  # the recorder's own: not records
DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)

decode_check = msgspec.json.Decoder(Check).decode
decode_index = msgspec.json.Decoder(Index).decode
decode_tally = msgspec.json.Decoder(Tally).decode
_decode_any = msgspec.json.Decoder().decode

__all__ = ["CHECK_PREFIX", "DECODE_ERRORS", "INDEX_PREFIX", "RECORDER_LINES", "TALLY_PREFIX",
           "BlockSeal", "Record", "decode_check", "decode_index", "decode_record",
           "decode_tally", "display_name", "parse_header", "reason", "schema_of"]


def display_name(path: str | os.PathLike[str]) -> str:
    return "<stdin>" if str(path) == "-" else str(path)


def reason(exc: BaseException) -> str:
    """Why a line did not decode, in one line of at most 200 characters (msgspec's messages
    can quote what it read)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


def schema_of(first_line: bytes) -> int | None:
    """The schema the header line claims, or None if it is not a header that says one."""
    try:
        schema = _decode_any(first_line).get("schema")
    except (msgspec.DecodeError, RecursionError, AttributeError):
        return None
    return schema if isinstance(schema, int) else None


def parse_header(line: bytes, name: str) -> Header:
    """The header line of `name`, or RecordingError saying what is wrong with it."""
    not_recording = f"{name}:1: not an observatory recording (the first line is not a header)"
    if len(line) > limits.MAX_HEADER_BYTES:
        raise RecordingError(f"{name}:1: the header line is {len(line):,} bytes, longer than "
                             f"the reader's limit of {limits.MAX_HEADER_BYTES:,}")
    try:
        raw = _decode_any(line)
    except RecursionError:
        raise RecordingError(f"{name}:1: the header is nested deeper than the reader allows "
                             f"({limits.MAX_DEPTH} levels)") from None
    except msgspec.DecodeError:
        raise RecordingError(not_recording) from None
    if not isinstance(raw, dict) or raw.get("kind") != "header":
        raise RecordingError(not_recording)
    if limits.depth_exceeds(raw):
        raise RecordingError(f"{name}:1: the header is nested deeper than the reader allows "
                             f"({limits.MAX_DEPTH} levels)")
    schema = raw.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise RecordingError(f"{name}:1: header has no schema version: not a recording this "
                             f"observatory wrote")
    if schema > SCHEMA_VERSION:
        raise RecordingError(f"{name}:1: recording schema {schema} is newer than this "
                             f"observatory reads ({SCHEMA_VERSION}): upgrade the observatory")
    try:
        return msgspec.convert(raw, Header)
    except (msgspec.ValidationError, RecursionError) as exc:
        raise RecordingError(f"{name}:1: bad header ({reason(exc)})") from None


class BlockSeal:
    """The lines since the last Check line, as a reader that takes them one at a time sees
    them: how many, and their CRC-32 (newlines included). `closes(check)` says whether the
    Check line that ends them matches, and starts the next block."""

    __slots__ = ("crc", "lines")

    def __init__(self) -> None:
        self.crc = 0
        self.lines = 0

    def add(self, line: bytes) -> None:
        """One line, without its newline."""
        self.crc = zlib.crc32(b"\n", zlib.crc32(line, self.crc))
        self.lines += 1

    def closes(self, check_line: bytes) -> bool:
        """Whether `check_line` decodes and seals exactly the lines added since the last one."""
        try:
            check = decode_check(check_line)
            ok = check.lines == self.lines and check.crc == self.crc
        except DECODE_ERRORS:
            ok = False
        self.crc = self.lines = 0
        return ok
