"""Read recordings: whole files into an indexed run (`load`), or growing ones as a stream
(`follow`).

Why it looks like this:

- Loading must be fast (100,000 steps in well under a second) and must never pay vLLM's or
  torch's import: this module needs only msgspec (and zstandard for `.zst`).
- Nothing in a file is ever executed: lines decode into the typed records of engine.stream.records.
- A writer killed with `kill -9` leaves a cut last line (or a cut last zstd frame). That is
  normal, not corruption: everything before it loads and `truncated` says the tail was cut.
- Anything else that is wrong (a corrupt line in the middle, a schema newer than ours, a file
  that is not a recording) is a RecordingError, a ConfigError whose one-line message names the
  file and line, so every command turns it into `observatory: error: ...` and exit 2.
  `lenient=True` skips corrupt lines instead and counts them in `skipped_lines`.
"""

from __future__ import annotations

import gc
import os
import select
import sys
import threading
import time
from typing import Any, Iterator

import msgspec

from engine.errors import ConfigError
from engine.stream.records import SCHEMA_VERSION, Header, Record, RunFinished
from engine.stream.run import Recording

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_CHUNK = 1 << 20

_line_decoder = msgspec.json.Decoder(Record)
_any_decoder = msgspec.json.Decoder()


class RecordingError(ConfigError):
    """A recording that cannot be read; the message names the file and, if known, the line."""


# ---- loading a whole file -----------------------------------------------------------------

def display_name(path: str | os.PathLike[str]) -> str:
    return "<stdin>" if str(path) == "-" else str(path)


def _read_all(path: str | os.PathLike[str]) -> bytes:
    name = display_name(path)
    try:
        if str(path) == "-":
            return sys.stdin.buffer.read()
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise RecordingError(f"{name}: no such file: pass the path of a recording "
                             f"(they are in recordings/ by default)") from None
    except IsADirectoryError:
        raise RecordingError(f"{name}: is a directory: pass one recording file") from None
    except OSError as exc:
        raise RecordingError(f"{name}: cannot read: {exc.strerror or exc}") from None


def _decompress(data: bytes, name: str) -> tuple[bytes, bool]:
    """Decode concatenated zstd frames; return (text, the last frame was cut).

    Frames are walked one by one (fed in chunks, so leftovers stay small) because a cut last
    frame can end on a line boundary: only the frame itself knows it is incomplete.
    """
    import zstandard  # only .zst recordings pay for it

    dctx = zstandard.ZstdDecompressor()
    out: list[bytes] = []
    obj = dctx.decompressobj()
    fed = False
    try:
        for start in range(0, len(data), _CHUNK):
            chunk = data[start:start + _CHUNK]
            while chunk:
                out.append(obj.decompress(chunk))
                fed = True
                if obj.eof:
                    chunk = obj.unused_data
                    obj, fed = dctx.decompressobj(), False
                else:
                    chunk = b""
    except zstandard.ZstdError as exc:
        raise RecordingError(f"{name}: corrupt zstd data ({exc}): the compressed file is damaged"
                             f"; nothing after the damage can be read") from None
    return b"".join(out), fed


def parse_header(line: bytes, name: str) -> Header:
    """Check `kind` and `schema` before decoding the rest, so a newer schema is reported as
    such rather than as whatever field it changed."""
    not_recording = f"{name}:1: not an observatory recording (the first line is not a header)"
    try:
        raw = _any_decoder.decode(line)
    except msgspec.DecodeError:
        raise RecordingError(not_recording) from None
    if not isinstance(raw, dict) or raw.get("kind") != "header":
        raise RecordingError(not_recording)
    schema = raw.get("schema")
    if not isinstance(schema, int):
        raise RecordingError(f"{name}:1: header has no schema version: not a recording this "
                             f"observatory wrote")
    if schema > SCHEMA_VERSION:
        raise RecordingError(f"{name}:1: recording schema {schema} is newer than this "
                             f"observatory reads ({SCHEMA_VERSION}): upgrade the observatory")
    try:
        return msgspec.convert(raw, Header)
    except msgspec.ValidationError as exc:
        raise RecordingError(f"{name}:1: bad header ({_one_line(exc)})") from None


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _corrupt(name: str, lineno: int, exc: Exception) -> RecordingError:
    return RecordingError(f"{name}:{lineno}: corrupt line ({_one_line(exc)}): run with "
                          f"--lenient to skip corrupt lines")


def load(path: str | os.PathLike[str], lenient: bool = False,
         into: type[Recording] = Recording) -> Recording:
    """Read a whole recording ("-" is stdin) into an indexed Recording.

    Raises RecordingError for anything but a cut tail, which sets `truncated`.
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
    frame_cut = False
    if data.startswith(ZSTD_MAGIC):
        data, frame_cut = _decompress(data, name)
    if not data.strip():
        raise RecordingError(f"{name}: empty file: not an observatory recording")
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" if the file ends with a newline, else a cut last line
    truncated = False
    if tail:
        truncated = True
        lines.append(tail)
    try:
        header = parse_header(lines[0], name)
    except RecordingError:
        if len(lines) == 1 and truncated and lines[0].startswith(b'{"kind":"header"'):
            raise RecordingError(f"{name}:1: the header line is cut: the writer died before "
                                 f"writing anything usable") from None
        raise
    recording = into(header, name)
    decode = _line_decoder.decode
    append = recording.append
    last = len(lines) - 1
    for i in range(1, len(lines)):
        line = lines[i]
        try:
            item = decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            if i == last and truncated:
                break  # the cut tail: everything before it counts
            if not line.strip():
                continue
            if lenient:
                recording.skipped_lines += 1
                continue
            raise _corrupt(name, i + 1, exc) from None
        append(item)
    else:
        # The tail decoded: the cut fell just before its newline, nothing was lost.
        truncated = False
    recording.truncated = truncated or frame_cut
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
    """
    name = display_name(path)
    pending = b""
    lineno = 0
    header_seen = False
    decompressor: Any = None
    sniffed = False
    raw_head = b""
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
            try:
                chunk = decompressor.decompress(chunk)
            except Exception as exc:  # zstandard.ZstdError
                raise RecordingError(f"{name}: corrupt zstd data ({exc})") from None
        pending += chunk
        if b"\n" not in chunk:
            continue
        lines = pending.split(b"\n")
        pending = lines.pop()
        for line in lines:
            lineno += 1
            if not header_seen:
                header_seen = True
                yield parse_header(line, name)
                continue
            try:
                item = _line_decoder.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                if lenient or not line.strip():
                    continue
                raise _corrupt(name, lineno, exc) from None
            yield item
            if type(item) is RunFinished:
                return
    # stdin ended: a complete-but-unterminated last line still counts; a cut one does not.
    if pending.strip() and header_seen:
        try:
            yield _line_decoder.decode(pending)
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass
    elif pending.strip():
        yield parse_header(pending, name)
