"""Read a recording from its end: the recorder's index (engine.stream.records.Index) and only
the frames a reader asks for, instead of the whole file.

Why: `summary` of a 100,000-step run and a replay's first screen need the run's totals and its
last steps, not 60 MB of JSON. The recorder ends a file it closes with one small zstd frame
(a plain file: one line) holding the index and the final Check, so:

- `open_indexed(path)` reads the file's last TAIL_BYTES, finds that frame (the last zstd magic
  from which exactly one complete, checksummed frame runs to the end of the file), proves the
  index line by the final Check's CRC and line count, and returns an `IndexedFile`, or None:
  the file has no index (written before indexes, or cut before its close: a crash, a kill),
  or the tail is not what the recorder writes. None is never an error: the caller reads the
  whole file (engine.stream.reader.load), whose checks say what, if anything, is wrong.
- `IndexedFile.frame_records(k)` decodes frame k on its own (each frame starts right after a
  Check line), checks each of its blocks against its Check line, and returns its records.

What this path does not do is prove the rest of the file: `verify` and every full `load` read
and check everything, the index included (integrity.index_disagrees). Only msgspec and (for
`.zst`) zstandard are imported here.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import msgspec

from engine.stream import limits
from engine.stream.integrity import CHECK_PREFIX, INDEX_PREFIX, TALLY_PREFIX
from engine.stream.records import (STEP_TYPES, Check, EngineAborted, Header, Index, Record,
                                   RunFinished, Tally)
from engine.stream.zstdframes import ZSTD_MAGIC

TAIL_BYTES = 256 << 10
"""How much of the end is read to find the index. A 100,000-step index is ~1 KB; one with
a frame every MB of text fits a run of tens of GB."""

PAUSE_LINES = 256
"""How often a frame's decoding offers to pause (~1 ms of work): a frame is 2,000 steps."""

_index_decoder = msgspec.json.Decoder(Index)
_tally_decoder = msgspec.json.Decoder(Tally)
_check_decoder = msgspec.json.Decoder(Check)
_record_decoder = msgspec.json.Decoder(Record)
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


class IndexDamaged(Exception):
    """A frame the index points at does not decode or check: read the whole file instead."""


@dataclass
class IndexedFile:
    """A closed recording's index, and frames read from it on demand."""

    path: str
    index: Index
    compressed: bool
    size: int
    # Frames decoded so far (k -> (header, records)): a replay's window and its background
    # read share them, so a frame is decoded once. Records are immutable; dict reads and
    # writes are atomic, so the two threads need no lock.
    cache: dict[int, tuple[Header | None, list[Record]]] = field(default_factory=dict)
    tally: Tally | None = None  # the recorder's tally, once the frame holding it is decoded

    def frame_span(self, k: int) -> tuple[int, int]:
        """Byte range of frame k (the last one ends where the index's frame starts)."""
        frames = self.index.frames
        end = frames[k + 1][0] if k + 1 < len(frames) else self.index.index_offset
        return frames[k][0], end

    def frame_of(self, step: int) -> int:
        """The frame that holds `step` (the last one whose first step is at or before it)."""
        frames = self.index.frames
        lo, hi = 0, len(frames) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if frames[mid][1] <= step:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def frame_text(self, k: int) -> bytes:
        start, end = self.frame_span(k)
        if not 0 <= start < end <= self.size:
            raise IndexDamaged(f"frame {k} lies outside the file")
        with open(self.path, "rb") as f:
            f.seek(start)
            data = f.read(end - start)
        if not self.compressed:
            return data
        import zstandard

        try:
            obj = zstandard.ZstdDecompressor().decompressobj()
            text = obj.decompress(data)
        except zstandard.ZstdError as exc:
            raise IndexDamaged(f"frame {k} does not decode ({exc})") from None
        if not obj.eof or obj.unused_data:
            raise IndexDamaged(f"frame {k} does not end where the index says")
        return text

    def frame_records(self, k: int, pause: Callable[[], None] | None = None
                      ) -> tuple[Header | None, list[Record]]:
        """Frame k's records (and, in frame 0, the header), every block checked by its Check
        line (kept in `cache`). Raises IndexDamaged if anything does not hold. `pause` is
        called every PAUSE_LINES lines: a background reader waits there while the UI thread
        needs the interpreter."""
        cached = self.cache.get(k)
        if cached is None:
            cached = self.cache[k] = self._decode_frame(k, pause)
        return cached

    def _decode_frame(self, k: int, pause: Callable[[], None] | None = None
                      ) -> tuple[Header | None, list[Record]]:
        text = self.frame_text(k)
        if len(text) > limits.MAX_RECORDING_BYTES:
            raise IndexDamaged(f"frame {k} is too large")
        header = None
        out: list[Record] = []
        block_start = 0
        lines = text.split(b"\n")
        if lines[-1]:
            raise IndexDamaged(f"frame {k} ends inside a line")
        lines.pop()
        pos = 0
        count = 0
        decode = _record_decoder.decode
        for n, line in enumerate(lines):
            if pause is not None and not n % PAUSE_LINES:
                pause()
            end = pos + len(line) + 1
            if line.startswith(CHECK_PREFIX):
                try:
                    check = _check_decoder.decode(line)
                except _DECODE_ERRORS:
                    raise IndexDamaged(f"frame {k} has a damaged check line") from None
                if check.lines != count or check.crc != zlib.crc32(text[block_start:pos]):
                    raise IndexDamaged(f"frame {k} does not match its checks")
                block_start, count = end, 0
            else:
                count += 1
                if line.startswith(TALLY_PREFIX):
                    try:
                        self.tally = _tally_decoder.decode(line)
                    except _DECODE_ERRORS:
                        raise IndexDamaged(f"frame {k} has a damaged tally line") from None
                elif k == 0 and header is None and pos == 0:
                    from engine.stream.reader import RecordingError, parse_header

                    try:
                        header = parse_header(line, self.path)
                    except RecordingError as exc:
                        raise IndexDamaged(str(exc)) from None
                else:
                    try:
                        out.append(decode(line))
                    except _DECODE_ERRORS:
                        raise IndexDamaged(f"frame {k} has a line that does not decode"
                                           ) from None
            pos = end
        if count:
            raise IndexDamaged(f"frame {k} ends with lines no check covers")
        return header, out

    def header(self) -> Header:
        """The header: the first line of frame 0, which the recorder seals as a block of its
        own (so its Check line follows it; otherwise the whole frame is read and checked)."""
        text = self.frame_text(0)
        end = text.find(b"\n")
        check_end = text.find(b"\n", end + 1)
        if end > 0 and check_end > 0:
            try:
                check = _check_decoder.decode(text[end + 1:check_end])
            except _DECODE_ERRORS:
                check = None
            if check is not None and check.lines == 1 \
                    and check.crc == zlib.crc32(text[:end + 1]):
                from engine.stream.reader import RecordingError, parse_header

                try:
                    return parse_header(text[:end], self.path)
                except RecordingError as exc:
                    raise IndexDamaged(str(exc)) from None
        header, _ = self.frame_records(0)
        if header is None:
            raise IndexDamaged("frame 0 has no header")
        return header


def open_indexed(path: str | os.PathLike[str]) -> IndexedFile | None:
    """The file's index if it ends with one the final Check vouches for, else None."""
    if str(path) == "-":
        return None
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = max(0, size - TAIL_BYTES)
            f.seek(start)
            tail = f.read()
            f.seek(0)
            magic = f.read(4)
    except (OSError, ValueError):
        return None
    if len(tail) != size - start:
        return None
    if magic == ZSTD_MAGIC:
        found = _zstd_tail(tail, start)
        compressed = True
    else:
        found = _plain_tail(tail, start)
        compressed = False
    if found is None:
        return None
    index, offset = found
    if index.index_offset != offset or not index.frames or index.frames[0][0] != 0:
        return None
    if any(b[0] <= a[0] for a, b in zip(index.frames, index.frames[1:])) \
            or index.frames[-1][0] >= offset:
        return None
    return IndexedFile(str(path), index, compressed, size)


def _sealed_index(text: bytes) -> Index | None:
    """`text` is exactly an index line and a final Check that covers it: the Index, or None."""
    lines = text.split(b"\n")
    if len(lines) != 3 or lines[2] or not lines[0].startswith(INDEX_PREFIX):
        return None
    try:
        check = _check_decoder.decode(lines[1])
        if not check.final or check.lines != 1 or check.crc != zlib.crc32(lines[0] + b"\n"):
            return None
        return _index_decoder.decode(lines[0])
    except _DECODE_ERRORS:
        return None


def _zstd_tail(tail: bytes, start: int) -> tuple[Index, int] | None:
    """The index frame: the last magic from which one whole, checksummed frame runs to the
    end. A magic number that happens to sit inside compressed data does not decode so."""
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    at = len(tail)
    while True:
        at = tail.rfind(ZSTD_MAGIC, 0, at)
        if at < 0:
            return None
        if at + 4 < len(tail) and tail[at + 4] & 0x04:  # a content checksum, as the recorder's
            try:
                obj = dctx.decompressobj()
                text = obj.decompress(tail[at:])
            except zstandard.ZstdError:
                text = None
            if text is not None and obj.eof and not obj.unused_data:
                index = _sealed_index(text)
                return None if index is None else (index, start + at)
        if at == 0:
            return None


def _plain_tail(tail: bytes, start: int) -> tuple[Index, int] | None:
    if not tail.endswith(b"\n"):
        return None
    check_at = tail.rfind(b"\n", 0, len(tail) - 1) + 1
    if check_at <= 0:
        return None
    index_at = tail.rfind(b"\n", 0, check_at - 1) + 1
    if index_at <= 0 and start > 0:
        return None  # the index line starts before the tail: too long to be the recorder's
    index = _sealed_index(tail[index_at:])
    return None if index is None else (index, start + index_at)


def summary_of(indexed: IndexedFile) -> Any:
    """The index's summary as engine.analysis.summary's Summary or V1Summary, or None."""
    raw = indexed.index.summary
    if raw is None:
        return None
    from engine.analysis.summary import Summary, V1Summary

    if raw.get("engine") == "v1" and "longest_stall_steps" not in raw:
        return None  # folded before the watchdog's fields: its default would say "no stall"
    try:
        return msgspec.convert(raw, V1Summary if raw.get("engine") == "v1" else Summary)
    except (msgspec.ValidationError, AttributeError):
        return None


# Summary fields a frame's records can only add to (or raise the peak of): the whole run's
# value is at least the last frame's. The rest are the last record's (or derived).
_AT_LEAST = ("steps", "finished_requests", "peak_gpu_kv_pct", "peak_cpu_kv_pct", "peak_swapped",
             "swap_outs", "swap_ins", "recompute_preemptions", "prefill_blocked_steps",
             "policy_changes", "prompt_tokens", "generated_tokens", "exec_seconds",
             "preemptions", "max_preemptions_per_request", "lost_tokens", "recomputed_tokens",
             "computed_tokens", "cached_tokens_per_admission", "prompt_tokens_computed", "peak_running",
             "peak_waiting",
             "admission_withheld_steps", "peak_cpu_tier_chunks", "cpu_tier_loads",
             "cpu_tier_load_bytes", "cpu_tier_stores", "cpu_tier_store_bytes",
             "cpu_tier_evictions", "cpu_tier_hit_tokens", "cpu_tier_wait_seconds",
             "underfilled_steps")


def vouch(indexed: IndexedFile) -> str | None:
    """What makes the index untrustworthy as an answer without the records, or None.

    The index frame stands alone, so its checksums prove only that it was not damaged, not
    that it is this file's or that its numbers are the records'. It is held to the file's last
    data frame, which is read and checked block by block (a few ms): the step range and the
    end of the run must be that frame's, and the summary must be the recorder's tally sealed
    in that frame and must agree with the frame's records (its end, its last clock, and every
    count at least the frame's own). A file closed before tallies existed has none: the
    caller reads the records. What this does not prove: a tally forged together with a
    rewritten, resealed data frame; only a full read (`verify`) holds every record to it."""
    index = indexed.index
    k = len(index.frames) - 1
    try:
        _, records = indexed.frame_records(k)
    except (IndexDamaged, OSError) as exc:
        return f"the index's last frame does not read ({exc})"
    steps = [r for r in records if type(r) in STEP_TYPES]
    first = index.frames[k][1]
    if steps:
        if (steps[0].step, steps[-1].step) != (first, index.last_step):
            return (f"the index says its last frame holds steps {first}..{index.last_step}, "
                    f"it holds {steps[0].step}..{steps[-1].step}")
    elif index.last_step is not None and first != index.last_step + 1:
        return "the index's last frame is not where its steps end"
    ended = any(type(r) is RunFinished for r in records)
    if ended != index.finished:
        return (f"the index says finished {index.finished}, the records "
                f"{'end' if ended else 'do not end'} with the run's end")
    tally = indexed.tally
    if tally is None:
        return "no tally" if index.summary is not None else None
    if tally.summary != index.summary or tally.steps != index.steps:
        return "the index's summary is not the one sealed with the records"
    return _summary_against(index.summary, records, first)


def _summary_against(summary: dict[str, Any] | None, records: list[Record],
                     first: int) -> str | None:
    """What in `summary` the last frame's records (its first step `first`) contradict."""
    if summary is None:
        return None
    from engine.analysis.summary import LATER_SUMMARY_FIELDS, SummaryBuilder, current_names

    summary = current_names(summary)

    builder = SummaryBuilder()
    builder.v1 = summary.get("engine") == "v1"
    for record in records:
        builder.add(record)
    here = msgspec.to_builtins(builder.result())
    for name in _AT_LEAST:
        if name not in summary and name in LATER_SUMMARY_FIELDS:
            continue  # sealed before the field existed
        if name in here and not (isinstance(summary.get(name), (int, float))
                                 and summary[name] >= here[name]):
            return (f"the index's summary says {name} {summary.get(name)}, its last frame "
                    f"alone holds {here[name]}")
    abort = next((r for r in reversed(records) if type(r) is EngineAborted), None)
    if abort is not None:
        if summary.get("aborted") is not True or summary.get("abort_step") != abort.step:
            return (f"the index's summary says aborted {summary.get('aborted')} at step "
                    f"{summary.get('abort_step')}, the records abort at step {abort.step}")
    elif summary.get("aborted") is not False and not (
            isinstance(summary.get("abort_step"), int) and summary["abort_step"] < first) \
            and not any(getattr(r, "event", None) == "abort" for r in records):  # a vLLM log's
        return "the index's summary says the run aborted, the records do not"
    checks = []
    if any(type(r) is RunFinished for r in records):
        checks.append("end_reason")
    if any(type(r) in STEP_TYPES or type(r) is RunFinished for r in records):
        checks += ["sim_seconds", "wall_seconds"]
    for name in checks:
        if summary.get(name) != here.get(name):
            return (f"the index's summary says {name} {summary.get(name)}, the records "
                    f"{here.get(name)}")
    return None
