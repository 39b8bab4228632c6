"""The bytes of a recording, bounded: a whole file or stdin (`read_all`), or what a growing
file or a pipe gives as it comes (`chunks`). Nothing read may exhaust memory: a file over
engine.stream.limits' size is refused before it is read, and a pipe is read in chunks.
"""

from __future__ import annotations

import os
import select
import stat
import sys
import threading
import time
from typing import Any, Iterator

from engine.errors import RecordingError
from engine.stream import limits
from engine.stream.reader.lines import display_name

CHUNK = 1 << 20


def read_all(path: str | os.PathLike[str]) -> bytes:
    """The whole file ("-" is stdin), or RecordingError in one line."""
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
        raise RecordingError(f"{name}: no such file: pass the path of a recording (yours are "
                             f"in runs/ by default, the examples in recordings/)") from None
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
        chunk = f.read(min(CHUNK, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def chunks(path: str | os.PathLike[str], poll_s: float,
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
            chunk = os.read(fd, CHUNK)
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
            chunk = f.read(CHUNK)
            if chunk:
                yield chunk
            else:
                time.sleep(poll_s)
