"""What the commands that read input share: a log or file from a path or stdin, and the note,
on stderr, that a recording is cut, damaged or too old to be fully checked.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from engine.errors import RecordingError
from engine.safe_text import safe


def read_input(path: str) -> bytes:
    """The bytes of `path` (- for stdin); one line (RecordingError) when it cannot be read."""
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise RecordingError(f"cannot read {path}: {exc.strerror}") from None


def note_cut(recording: Any) -> None:
    """Say on stderr (never stdout, which may be JSON) that the file is cut, damaged (read
    with --lenient) or too old to be fully checked, before any number from it is printed."""
    from engine.stream.reader import notes

    for note in notes(recording):
        sys.stderr.write(safe(note) + "\n")  # quotes the path and what was wrong in the file
