"""The reader's live mode: a recording another process is still writing, or stdin, streamed
record by record as its lines arrive (`replay --follow`, the TUI's FollowSource).

Records are yielded before the Check line that seals them (a follower must not lag a flush
behind), so a Check that fails raises afterwards (or, lenient, is ignored). The same limits as
a whole read hold: line length, and the decompression ratio of a `.zst` fed piece by piece.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Iterator

from engine.errors import RecordingError
from engine.stream import limits
from engine.stream.reader.lines import (CHECK_PREFIX, DECODE_ERRORS, INDEX_PREFIX, TALLY_PREFIX,
                                        BlockSeal, decode_record, display_name, parse_header,
                                        reason)
from engine.stream.reader.source import chunks
from engine.stream.reader.zstdframes import ZSTD_MAGIC
from engine.stream.records import Header, Record, RunFinished


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
    seal = BlockSeal()  # the lines since the last Check line
    compressed = produced = 0
    for chunk in chunks(path, poll_s, stop):
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
                seal.add(line)
                yield parse_header(line, name)
                continue
            if line.startswith(CHECK_PREFIX):
                if not seal.closes(line) and not lenient:
                    raise RecordingError(f"{name}:{lineno}: the lines before this check do "
                                         f"not match it: the file is damaged")
                continue
            seal.add(line)
            if line.startswith((INDEX_PREFIX, TALLY_PREFIX)):  # the recorder's, at close
                continue
            try:
                item = decode_record(line)
            except DECODE_ERRORS as exc:
                if lenient or not line.strip():
                    continue
                raise RecordingError(f"{name}:{lineno}: corrupt line ({reason(exc)}); run "
                                     f"with --lenient to skip corrupt lines") from None
            yield item
            if type(item) is RunFinished:
                return
    # stdin ended: a complete-but-unterminated last line still counts; a cut one does not.
    if pending.strip() and header_seen:
        try:
            yield decode_record(pending)
        except DECODE_ERRORS:
            pass
    elif pending.strip():
        yield parse_header(pending, name)
