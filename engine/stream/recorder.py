"""Write a session's stream to disk as JSON Lines, crash-safe.

Why it looks like this:

- One JSON line per record (msgspec, no pickle), so `jq` reads a recording without us.
- `.zst` files are a stream of zstd frames of about FRAME_BYTES of text each; every flush ends
  a zstd *block* (`COMPRESSOBJ_FLUSH_BLOCK`), so any prefix of the file that ends where a flush
  ended decodes on its own: a `kill -9` of the writer loses only what was still buffered, and a
  reader (or `--follow`) sees everything flushed so far. Keeping the compression history across
  flushes (a frame per flush would restart it) keeps the size per step independent of how
  often the flush timer fires: ~36 bytes/step on the seed runs instead of ~50 on a busy
  machine. A frame ends every FRAME_BYTES so that damage in one loses at most that much text
  to a lenient reader, and each complete frame carries zstd's content checksum.
- The engine thread calls `write()` once per record, so it only encodes and appends to a buffer;
  the disk is touched at most every `FLUSH_INTERVAL_S` seconds, plus at the end of the stream.
- A flush checked only on `write()` would leave records in memory while the engine is paused or
  stuck in a long step, so a small daemon thread also flushes whatever has waited for
  `FLUSH_INTERVAL_S`. `flush()` is thread-safe; anyone may call it.
- A failing disk or a closed pipe must not kill a live session: the first OSError is kept in
  `error`, recording stops, and whoever owns the recorder reports it.
- Every flush ends with a `Check` line (seq, line count, CRC-32 of the flushed lines) and
  `close()` adds a final one, so a reader can prove a file whole or say exactly what is wrong
  with it (engine.stream.integrity). zstd frames also carry zstd's content checksum.
- `close()` first ends the open frame, then writes an `Index` line (where each frame starts and
  its first step, and the run's summary) and the final Check in one last small frame, so
  `summary` and a replay's first screen read the tail instead of the whole file
  (engine.stream.indexed). A file cut before that (a crash, an abort the writer did not
  survive) has no index and reads whole, as before. The summary is folded here, as the records
  go by (engine.analysis.summary's builder: 1.6 us a record, measured over a 100,000-step
  run); a record handed over as bytes only (`write_line` without `item`) leaves the index
  without one.
"""

from __future__ import annotations

import errno
import os
import re
import threading
import time
import zlib
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import msgspec

from engine.outpath import STDOUT, Target, open_output
from engine.stream.records import (STEP_TYPES, Check, EngineAborted, Header, Index, Record,
                                   RunFinished, Tally, encode)

FLUSH_INTERVAL_S = 0.5
# Level 9, not zstd's default 3: a flush every 0.5 s makes small blocks, and at level 3 they
# cost 43 bytes a step on the seed preset (40 is the budget); level 9 writes 34 for about 6 us
# more CPU a step on the recorder's thread (bench/bench_recording.py), well under 1 % of a step.
ZSTD_LEVEL = 9
FRAME_BYTES = 1 << 20  # text per zstd frame (about 1,700 steps of the seed run)
RECORDINGS_DIR = "recordings"


def default_recording_path(spec: Any, now: datetime | None = None) -> Path:
    """`recordings/<UTC %Y%m%dT%H%M%SZ>-<workload>-<policy>.jsonl.zst`, relative to the cwd.

    `spec` is an engine.spec.RunSpec (`.preset`, `.trace` and `.policy` are read). The workload
    is the preset's name, or `trace-<file stem>` for a trace run (whose workload is the trace: a
    trace run without --preset was named for the default preset, `v1-thrash`). ':' in a policy
    ("watermark:0.5") and anything but letters, digits, '.', '_' and '-' in a trace's name
    become '_', so the name is a valid file name everywhere. Two runs started in the same second
    must not overwrite each other, so an existing name gets `-2`, `-3`...
    """
    stamp = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    trace = getattr(spec, "trace", None)
    workload = spec.preset if not trace else "trace-" + re.sub(
        r"[^A-Za-z0-9._-]", "_", Path(trace).name.split(".")[0])[:40]
    stem = f"{stamp}-{workload}-{str(spec.policy).replace(':', '_')}"
    path = Path(RECORDINGS_DIR) / f"{stem}.jsonl.zst"
    n = 1
    while path.exists():
        n += 1
        path = Path(RECORDINGS_DIR) / f"{stem}-{n}.jsonl.zst"
    return path


class Recorder:
    """Append a Header and then Records to a path ("-" is stdout).

    `Recorder(path, header)` writes the header at once (so a follower sees it immediately);
    `Recorder(path)` waits for the header to arrive through `sink()`, which is the form a
    `Session.subscribe(rec.sink)` wants since a session's first item is its Header.
    """

    def __init__(self, path: str | os.PathLike[str], header: Header | None = None,
                 *, flush_interval_s: float = FLUSH_INTERVAL_S,
                 background_flush: bool = True, frame_bytes: int = FRAME_BYTES,
                 opened: tuple[IO[bytes], Target] | None = None) -> None:
        self.path: str = str(path)
        self.bytes_written: int = 0
        self.records_written: int = 0
        self.error: OSError | None = None
        self.header_written = False
        self._interval = flush_interval_s
        self._lock = threading.Lock()
        self._buf: list[bytes] = []
        self._buf_bytes = 0  # text in _buf
        self._closed = False
        self._last_flush = time.monotonic()
        self._compressor: Any = None
        self._frame: Any = None  # the open zstd frame's compressobj
        self._frame_text = 0  # text bytes in it so far
        self._frame_limit = frame_bytes
        self._seq = 0  # Check lines written
        # The index (written at close): each frame's (byte offset, first step), the lines and
        # steps so far, and the summary folded from every record.
        self._frames: list[tuple[int, int]] = []
        self._chunk_text = 0  # plain files: text since the last chunk start
        self._lines = 0  # lines written (flushed), Check lines included
        self._steps = 0
        self._first_step: int | None = None
        self._last_step: int | None = None
        self._next_step = 0  # the step the next step record should carry
        self._buf_first_step: int | None = None  # first step record in the buffer
        self._finished = False
        self._summary: Any = None  # engine.analysis.summary.SummaryBuilder, or None: unknown
        # In place, never by rename: a follower watches the file grow, and a device, FIFO or
        # symlink the user named stays what it is (engine.outpath).
        self._file: IO[bytes]
        # `opened`: the file its owner opened (engine.stream.scribe gets it from the engine's
        # process, which opened it so that a bad path fails there at once).
        self._file, self.target = opened if opened is not None else open_output(self.path)
        self._owns_file = self.target.kind != STDOUT
        if self._owns_file and self.path.endswith(".zst"):
            import zstandard  # imported here: plain recordings and stdout do not need it

            self._compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True)
        if header is not None:
            self._write_header(header)
        self._stop = threading.Event()
        if background_flush:
            threading.Thread(target=self._flush_loop, name="observatory-recorder-flush",
                             daemon=True).start()

    # ---- the engine thread's side -------------------------------------------------------

    def sink(self, item: Header | Record) -> None:
        """Session subscriber: writes the first Header it sees, then every Record."""
        if isinstance(item, Header):
            if not self.header_written:
                self._write_header(item)
            return
        self.write(item)

    def write(self, item: Record) -> None:
        """Encode and buffer one record; flush if the last flush is FLUSH_INTERVAL_S old."""
        if self._closed or self.error is not None:
            return
        self.write_line(encode(item) + b"\n", end=isinstance(item, (RunFinished, EngineAborted)),
                        item=item)

    def write_line(self, line: bytes, end: bool = False, item: Record | None = None) -> None:
        """`write` for a record its owner has already encoded (with the newline), so a stream
        that also goes to network clients is encoded once. `end`: flush now (an abort or the
        end record: what a follower waits for). `item`: the record `line` encodes, for the
        index (without it the index carries no summary)."""
        if self._closed or self.error is not None:
            return
        with self._lock:
            self._buf.append(line)
            self._buf_bytes += len(line)
            self.records_written += 1
            self._note(item)
            # A writer faster than the flush timer (a sweep cell, an import) still ends a
            # frame every FRAME_BYTES, so the index can point into the file.
            if (end or self._buf_bytes >= self._frame_limit
                    or time.monotonic() - self._last_flush >= self._interval):
                self._flush_locked()

    # ---- anyone's side --------------------------------------------------------------------

    def flush(self) -> None:
        """Write buffered records now (one zstd frame) and flush the OS file. Thread-safe."""
        with self._lock:
            self._flush_locked()

    def close(self) -> None:
        """Flush and close. Idempotent; never raises for a disk error (see `error`)."""
        self._stop.set()
        with self._lock:
            if self._closed:
                return
            self._flush_locked(final=True)
            self._closed = True
            if self._owns_file:
                try:
                    self._file.close()
                except OSError as exc:
                    self.error = self.error or exc

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals ------------------------------------------------------------------------

    def _flush_loop(self) -> None:
        """Flush what has waited FLUSH_INTERVAL_S, whether or not the engine writes more."""
        while not self._stop.wait(self._interval / 2):
            with self._lock:
                if self._buf and time.monotonic() - self._last_flush >= self._interval:
                    self._flush_locked()

    def _note(self, item: Record | None) -> None:
        """What the index needs to know of a record just buffered (under the lock)."""
        summary = self._summary
        if item is None:
            self._summary = None  # not every record seen: the index cannot vouch a summary
            return
        if summary is not None:
            summary.add(item)
        kind = type(item)
        if kind in STEP_TYPES:
            step = item.step  # type: ignore[union-attr]
            if self._buf_first_step is None:
                self._buf_first_step = step
            if self._first_step is None:
                self._first_step = step
            self._last_step = step
            self._next_step = step + 1
            self._steps += 1
        elif kind is RunFinished:
            self._finished = True

    def _write_header(self, header: Header) -> None:
        with self._lock:
            if self.header_written:
                return
            self._buf.insert(0, encode(header) + b"\n")
            self.header_written = True
            self._next_step = header.starts_at_step
            # imported here: engine.stream must not need the analysis package to record
            from engine.analysis.summary import SummaryBuilder

            self._summary = SummaryBuilder()
            self._summary.add(header)
            self._flush_locked()

    def _frame_starts(self, first: int | None) -> None:
        """A frame (a zstd frame; a chunk of a plain file) starts with the data being flushed,
        whose first step record is `first`: note its offset and first step for the index."""
        self._frames.append((self.bytes_written, self._next_step if first is None else first))

    def _compress(self, data: bytes, end_frame: bool, first: int | None) -> bytes:
        """`data` as zstd, ending a block (decodable now) or, every FRAME_BYTES and at the
        end, the frame (with its content checksum)."""
        import zstandard

        if self._frame is None:
            self._frame, self._frame_text = self._compressor.compressobj(), 0
            self._frame_starts(first)
        out = self._frame.compress(data)
        self._frame_text += len(data)
        if end_frame or self._frame_text >= self._frame_limit:
            out += self._frame.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH)
            self._frame = None
        else:
            out += self._frame.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        return out

    def _flush_locked(self, final: bool = False) -> None:
        self._last_flush = time.monotonic()
        if not self.header_written:  # a recording must start with its header: wait for it
            return
        if (not self._buf and not final) or self._closed or self.error is not None:
            self._buf.clear()
            self._buf_bytes = 0
            return
        if final:
            # the tally closes the last data frame, sealed with its records; then end the
            # open frame: the index gets a small frame of its own
            summary = self._summary_dict()
            if summary is not None:
                self._buf.append(encode(Tally(steps=self._steps, summary=summary)) + b"\n")
            if self._buf:
                self._write_block(end_frame=True)
            elif self._frame is not None:
                import zstandard

                frame, self._frame = self._frame, None
                self._write(frame.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))
            if self.error is not None:
                return
            self._buf.append(encode(self._index()) + b"\n")
        self._write_block(end_frame=final, final=final)

    def _summary_dict(self) -> dict[str, Any] | None:
        summary = self._summary
        return None if summary is None else msgspec.to_builtins(summary.result())

    def _index(self) -> Index:
        return Index(frames=list(self._frames), index_offset=self.bytes_written,
                     lines=self._lines, steps=self._steps, first_step=self._first_step,
                     last_step=self._last_step, finished=self._finished,
                     summary=self._summary_dict())

    def _write_block(self, end_frame: bool, final: bool = False) -> None:
        """The buffered lines and their Check line, out to the file."""
        data = b"".join(self._buf)
        check = Check(seq=self._seq, lines=len(self._buf), crc=zlib.crc32(data), final=final)
        data += encode(check) + b"\n"
        self._seq += 1
        self._lines += len(self._buf) + 1
        self._buf.clear()
        self._buf_bytes = 0
        first, self._buf_first_step = self._buf_first_step, None
        if self._compressor is not None:
            data = self._compress(data, end_frame=end_frame, first=first)
        elif not final:  # the index line is not a chunk of its own
            if not self._frames or self._chunk_text >= self._frame_limit:
                self._frame_starts(first)
                self._chunk_text = 0
            self._chunk_text += len(data)
        self._write(data)

    def _write(self, data: bytes) -> None:
        try:
            self._file.write(data)
            self._file.flush()
        except (OSError, ValueError) as exc:  # full disk, closed pipe or file: stop recording,
            # keep the session alive
            self.error = exc if isinstance(exc, OSError) else OSError(errno.EBADF, str(exc))
            return
        self.bytes_written += len(data)
