"""Read recordings: whole files into an indexed run (`load`), or growing ones as a stream
(`follow`).

Why it looks like this:

- Loading must be fast (100,000 steps in well under a second) and must never pay vLLM's or
  torch's import: this module needs only msgspec (and zstandard for `.zst`).
- Nothing in a file is ever executed: lines decode into the typed records of
  engine.stream.records, whose fields carry bounds.
- Every file is checked (engine.stream.integrity): the recorder's Check lines, consecutive
  steps, end records that agree. A file is either whole, or cut (the writer stopped: what was
  sealed loads and `truncated`/`cut_note` say where it stops), or damaged: a RecordingError,
  an ObservatoryError whose one-line message names the file, the line and what is wrong, so every
  command turns it into `observatory: error: ...` and exit 2. `lenient=True` skips what is
  damaged instead and records it in `skipped_lines` / `problems`.
- Nothing read may exhaust memory or the stack: sizes, decompression ratio, line length and
  nesting are bounded (engine.stream.limits).
"""

from __future__ import annotations

import gc
import os
import select
import stat
import sys
import threading
import time
import zlib
from typing import Any, Iterator

import msgspec

from engine.stream import limits
from engine.stream.integrity import (CHECK_PREFIX, INDEX_PREFIX, TALLY_PREFIX, RecordingError,
                                     index_disagrees, load_checked, load_unchecked, one_line)
from engine.stream.records import SCHEMA_VERSION, Check, Header, Record, RunFinished
from engine.stream.run import Recording
from engine.stream.zstdframes import ZSTD_MAGIC, ZstdDamage, ZstdLimitError, decompress

__all__ = ["RecordingError", "display_name", "follow", "load", "parse_header"]

_CHUNK = 1 << 20

_line_decoder = msgspec.json.Decoder(Record)
_check_decoder = msgspec.json.Decoder(Check)
_any_decoder = msgspec.json.Decoder()
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


# ---- loading a whole file -----------------------------------------------------------------

def display_name(path: str | os.PathLike[str]) -> str:
    return "<stdin>" if str(path) == "-" else str(path)


def _read_all(path: str | os.PathLike[str]) -> bytes:
    name = display_name(path)
    limit = limits.MAX_RECORDING_BYTES
    try:
        if str(path) == "-":
            if sys.stdin is None:
                raise RecordingError(f"{name}: stdin is closed: pass a recording's path, or "
                                     f"pipe one in")
            data = _read_bounded(sys.stdin.buffer, limit)
        else:
            with open(path, "rb") as f:
                data = _read_bounded(f, limit)
    except FileNotFoundError:
        raise RecordingError(f"{name}: no such file: pass the path of a recording "
                             f"(they are in recordings/ by default)") from None
    except IsADirectoryError:
        raise RecordingError(f"{name}: is a directory: pass one recording file") from None
    except (OSError, ValueError) as exc:
        raise RecordingError(f"{name}: cannot read: {getattr(exc, 'strerror', None) or exc}"
                             ) from None
    if data is None or len(data) > limit:
        raise RecordingError(f"{name}: larger than the reader's limit of {limit:,} bytes")
    return data


def _read_bounded(f: Any, limit: int) -> bytes | None:
    """Up to `limit` + 1 bytes: a regular file whole if its size allows, a pipe in chunks
    (`read(limit)` would allocate `limit` at once). None: a regular file over the limit."""
    try:
        st = os.fstat(f.fileno())
    except (OSError, ValueError, AttributeError):
        st = None
    if st is not None and stat.S_ISREG(st.st_mode):
        return f.read() if st.st_size <= limit else None
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = f.read(min(_CHUNK, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _has_checks(text: bytes) -> bool:
    """Whether the recording carries Check lines (schema >= 2), judged from its header."""
    newline = text.find(b"\n")
    try:
        schema = _any_decoder.decode(text[:newline if newline >= 0 else len(text)]).get("schema")
    except (msgspec.DecodeError, RecursionError, AttributeError):
        return False
    return isinstance(schema, int) and schema >= 2


def parse_header(line: bytes, name: str) -> Header:
    """Check `kind` and `schema` before decoding the rest, so a newer schema is reported as
    such rather than as whatever field it changed."""
    not_recording = f"{name}:1: not an observatory recording (the first line is not a header)"
    if len(line) > limits.MAX_HEADER_BYTES:
        raise RecordingError(f"{name}:1: the header line is {len(line):,} bytes, longer than "
                             f"the reader's limit of {limits.MAX_HEADER_BYTES:,}")
    try:
        raw = _any_decoder.decode(line)
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
        raise RecordingError(f"{name}:1: bad header ({one_line(exc)})") from None


def load(path: str | os.PathLike[str], lenient: bool = False,
         into: type[Recording] = Recording) -> Recording:
    """Read a whole recording ("-" is stdin) into an indexed Recording.

    Raises RecordingError for a damaged file; a cut one loads what was sealed and sets
    `truncated` (see engine.stream.integrity.notes for what to tell the user).
    """
    # Decoding allocates millions of small containers, none of them cyclic; without this the
    # cyclic GC runs over and over during a load and doubles its time.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(path, lenient, into)
    finally:
        if was_enabled:
            gc.enable()


def _load(path: str | os.PathLike[str], lenient: bool, into: type[Recording]) -> Recording:
    name = display_name(path)
    data = _read_all(path)
    frame_notes: list[str] = []
    frame_cut = False
    verified = 0
    frame_starts: list[int] | None = None
    if data.startswith(ZSTD_MAGIC):
        try:
            walk = decompress(data, lenient=lenient, keep_damaged=True)
            if walk.damaged_frames and not _has_checks(walk.text):
                walk = decompress(data, lenient=lenient)  # nothing would vouch for it: drop
        except ZstdLimitError as exc:
            raise RecordingError(f"{name}: {exc}: refusing to read it") from None
        except ZstdDamage as exc:
            raise RecordingError(f"{name}: {exc}: the compressed file is damaged; run with "
                                 f"--lenient to read the frames around it") from None
        data, frame_cut, frame_notes = walk.text, walk.cut, walk.damaged
        verified = walk.verified
        frame_starts = walk.frame_starts
    if not data or data.isspace():
        if frame_notes:
            raise RecordingError(f"{name}: nothing readable: {frame_notes[0]}")
        raise RecordingError(f"{name}: empty file: not an observatory recording")
    newline = data.find(b"\n")
    first = data if newline < 0 else data[:newline]
    try:
        header = parse_header(first, name)
    except RecordingError:
        if newline < 0 and first.startswith(b'{"kind":"header"'):
            raise RecordingError(f"{name}:1: the header line is cut: the writer died before "
                                 f"writing anything usable") from None
        raise
    recording = into(header, name)
    for note in frame_notes:  # lenient: frames dropped by the zstd walk
        recording.problem_count += 1
        recording.problems.append(note)
    if header.schema >= 2:
        load_checked(data, recording, name, lenient, verified)
    else:
        load_unchecked(data, recording, name, lenient)
    if frame_cut:  # an index in a frame cut short (its checksum lost) vouches for nothing
        recording.index = recording.tally = None
    wrong = index_disagrees(recording, frame_starts)
    if wrong is not None:
        if not lenient:
            raise RecordingError(f"{name}: {wrong}: the index is damaged; run with --lenient "
                                 f"to read the records without it")
        recording.index = None
        recording.problem_count += 1
        recording.problems.append(wrong)
    if frame_cut and not recording.truncated:
        recording.truncated = True
        recording.cut_note = (f"the file is cut inside its last zstd frame, after step "
                              f"{recording.last_step}")
    return recording


# ---- following a growing file or a pipe ---------------------------------------------------

def _chunks(path: str | os.PathLike[str], poll_s: float,
            stop: threading.Event | None) -> Iterator[bytes]:
    """Raw bytes as they appear. A file is polled forever (until `stop`); stdin ends at EOF."""
    name = display_name(path)
    stopped = stop.is_set if stop is not None else (lambda: False)
    if str(path) == "-":
        fd = sys.stdin.fileno()
        while not stopped():
            ready, _, _ = select.select([fd], [], [], poll_s)
            if not ready:
                continue
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                return
            yield chunk
        return
    try:
        f = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        raise RecordingError(f"{name}: no such file: start the writer first, or pass - to "
                             f"read a recording from stdin") from None
    except OSError as exc:
        raise RecordingError(f"{name}: cannot read: {exc.strerror or exc}") from None
    with f:
        while not stopped():
            chunk = f.read(_CHUNK)
            if chunk:
                yield chunk
            else:
                time.sleep(poll_s)


def follow(path: str | os.PathLike[str], poll_s: float = 0.1,
           stop: threading.Event | None = None, lenient: bool = False
           ) -> Iterator[Header | Record]:
    """Yield the Header, then each Record as soon as its line is complete.

    Works on a file another process is still writing (plain or `.zst`, detected by content)
    and on stdin ("-"), so `ssh host observatory run --record - | observatory replay --follow -`
    needs no network service. Ends after the RunFinished record, at stdin's EOF, or when `stop`
    is set; a writer that died without RunFinished leaves a file follower polling until `stop`.

    Records are yielded before their flush's Check line arrives (a follower must not lag a
    flush behind), so a Check that fails raises afterwards (or, lenient, is ignored).
    """
    name = display_name(path)
    pending = b""
    lineno = 0
    header_seen = False
    decompressor: Any = None
    sniffed = False
    raw_head = b""
    crc = lines = 0  # of the lines since the last Check line
    compressed = produced = 0
    for chunk in _chunks(path, poll_s, stop):
        if not sniffed:
            raw_head += chunk
            if len(raw_head) < len(ZSTD_MAGIC) and ZSTD_MAGIC.startswith(raw_head):
                continue
            sniffed = True
            chunk, raw_head = raw_head, b""
            if chunk.startswith(ZSTD_MAGIC):
                import zstandard

                decompressor = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
        if decompressor is not None:
            pieces = []
            compressed += len(chunk)
            for at in range(0, len(chunk), limits.ZSTD_FEED_BYTES):
                try:
                    piece = decompressor.decompress(chunk[at:at + limits.ZSTD_FEED_BYTES])
                except Exception as exc:  # zstandard.ZstdError
                    raise RecordingError(f"{name}: corrupt zstd data ({exc})") from None
                produced += len(piece)
                if (produced > limits.ZSTD_RATIO_FREE_BYTES
                        and produced > limits.MAX_ZSTD_RATIO * compressed):
                    raise RecordingError(f"{name}: decompresses more than "
                                         f"{limits.MAX_ZSTD_RATIO}:1 (a zstd bomb, not a "
                                         f"recording): refusing to read it")
                pieces.append(piece)
            chunk = b"".join(pieces)
        pending += chunk
        if b"\n" not in chunk:
            if len(pending) > limits.MAX_LINE_BYTES:
                raise RecordingError(f"{name}:{lineno + 1}: line longer than the reader's "
                                     f"limit of {limits.MAX_LINE_BYTES:,} bytes")
            continue
        split = pending.split(b"\n")
        pending = split.pop()
        for line in split:
            lineno += 1
            if not header_seen:
                header_seen = True
                crc, lines = zlib.crc32(line + b"\n"), 1
                yield parse_header(line, name)
                continue
            if line.startswith(CHECK_PREFIX):
                try:
                    check = _check_decoder.decode(line)
                    bad = check.lines != lines or check.crc != crc
                except _DECODE_ERRORS:
                    bad = True
                if bad and not lenient:
                    raise RecordingError(f"{name}:{lineno}: the lines before this check do "
                                         f"not match it: the file is damaged")
                crc = lines = 0
                continue
            crc, lines = zlib.crc32(line + b"\n", crc), lines + 1
            if line.startswith((INDEX_PREFIX, TALLY_PREFIX)):  # the recorder's, at close
                continue
            try:
                item = _line_decoder.decode(line)
            except _DECODE_ERRORS as exc:
                if lenient or not line.strip():
                    continue
                raise RecordingError(f"{name}:{lineno}: corrupt line ({one_line(exc)}); run "
                                     f"with --lenient to skip corrupt lines") from None
            yield item
            if type(item) is RunFinished:
                return
    # stdin ended: a complete-but-unterminated last line still counts; a cut one does not.
    if pending.strip() and header_seen:
        try:
            yield _line_decoder.decode(pending)
        except _DECODE_ERRORS:
            pass
    elif pending.strip():
        yield parse_header(pending, name)
