"""The one reader of recordings, with three modes, and one decoder of the record union.

A recording is a Header line, record lines (engine.stream.records), and the recorder's own
lines: a Check sealing each flush, a Tally and an Index at close (engine.stream.recorder).
Every mode decodes lines the same way (`lines`: the header checked before it is decoded, the
records by `records.decode_record`, the recorder's lines by their first bytes) and bounds
what it reads (engine.stream.limits), so nothing in a file is executed or can exhaust memory:

- **checking** (`load`, checked.py): the whole file ("-" is stdin) read into an indexed
  Recording, every zstd frame, block, line and record checked; a file is whole, cut (what was
  sealed loads; `notes` says what to tell the user), or damaged: a RecordingError naming the
  file, the line and what is wrong (`lenient` skips what is damaged instead). `summary`,
  `verify`, `export` and a replay's whole run read this way.
- **indexed** (`open_indexed`, indexed.py): a closed file read from its end, trusting the
  recorder's index for where its frames are, each frame decoded (and its blocks checked) only
  when asked for; `vouch` says whether the index may answer without the records. A long
  replay opens on a window this way while the checking read goes on behind it.
- **live** (`follow`, live.py): a file another process is still writing, or stdin, record by
  record as its lines arrive (`replay --follow`).

`choose(path, follow=..., window_from_steps=...)` is the one place that picks a mode for a
replay: the TUI asks it (tui.run_source) and builds its screen from the answer. Loading never
imports vLLM, torch or the analysis package: only msgspec (and zstandard for `.zst`).
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass

from engine.errors import RecordingError
from engine.stream.reader.checked import load, notes
from engine.stream.reader.indexed import (PAUSE_LINES, IndexDamaged, IndexedFile, open_indexed,
                                          vouch)
from engine.stream.reader.lines import display_name, parse_header
from engine.stream.reader.live import follow
from engine.stream.records import Header

__all__ = ["PAUSE_LINES", "Choice", "IndexDamaged", "IndexedFile", "Mode", "RecordingError",
           "choose", "display_name", "follow", "load", "notes", "open_indexed", "parse_header",
           "vouch"]


class Mode(enum.Enum):
    """How a recording is read."""

    CHECKING = "checking"  # the whole file, everything checked (`load`)
    INDEXED = "indexed"  # from its index: frames on demand (`open_indexed`)
    LIVE = "live"  # as it grows (`follow`)


@dataclass(frozen=True)
class Choice:
    """The reader's answer to "how do I read this file": the mode, and for the indexed mode the
    opened file and its header (read and checked already)."""

    mode: Mode
    indexed: IndexedFile | None = None
    header: Header | None = None


def choose(path: str | os.PathLike[str], *, follow: bool = False,
           window_from_steps: int | None = None) -> Choice:
    """How to read `path` for a replay. LIVE when following (RecordingError if there is no
    such file yet); INDEXED when the file ends with an index the reader vouches for and holds
    at least `window_from_steps` steps (None: never); otherwise CHECKING. Never reads more
    than the file's tail and its last data frame."""
    name = str(path)
    if follow:
        if name != "-" and not os.path.exists(name):
            raise RecordingError(f"{name}: no such file: start the writer first, or pass - to "
                                 f"read a recording from stdin")
        return Choice(Mode.LIVE)
    if window_from_steps is None or name == "-":
        return Choice(Mode.CHECKING)
    indexed = open_indexed(name)
    if indexed is None or indexed.index.last_step is None \
            or indexed.index.steps < window_from_steps:
        return Choice(Mode.CHECKING)
    if vouch(indexed) not in (None, "no tally"):
        return Choice(Mode.CHECKING)  # the index is not the records': the whole read says why
    try:
        header = indexed.header()
    except (IndexDamaged, OSError):
        return Choice(Mode.CHECKING)
    return Choice(Mode.INDEXED, indexed, header)
