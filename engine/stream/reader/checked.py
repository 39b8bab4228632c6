"""The reader's checking mode: a whole recording read into a Run (`load`), every frame, block,
line and record checked. What makes a recording trustworthy, and the rules:

The recorder (schema >= 2) ends every flush with a `Check` line (engine.stream.records):

    {"kind":"check","seq":7,"lines":45,"crc":1234567890}

covering every line since the previous Check: how many (`lines`), their CRC-32 (newlines
included) and the flush's number (`seq`). `close()` writes one more with `"final":true`.
One Check per flush, not per line: a flush is ~45 steps on the seed run, so it costs about one
byte per step compressed, and the reader checks it with one C call over the block's bytes.

Together with rules on the records themselves, a reader can tell a whole file from:

- a flipped byte in a plain `.jsonl` (CRC; in a `.zst`, zstd's own content checksum fails first);
- lines added, deleted or duplicated (`lines`), and zstd frames or blocks lost, repeated or
  reordered (`seq`);
- steps lost, repeated or out of order (step numbers are consecutive from the header's
  `starts_at_step`), an abort or end record that disagrees with the steps before it, records
  after the end;
- values no run produces (used > total blocks; the per-field bounds are in records.py);
- a file cut anywhere, even exactly at a line end or a frame boundary: without the final Check
  (and without the run's end record) a file is cut. Lines after the last Check are unverified
  and dropped, and the note says how many.

A violation is one line, `FILE:LINE: what is wrong`, raised as RecordingError (exit 2). With
`lenient`, the damaged block, line or record is skipped instead, counted in `skipped_lines` and
described in `problems`, and every command says the numbers come from a damaged file.
Schema 1 files (no Check lines) still load under the record rules, with `unchecked` set.
"""

from __future__ import annotations

import gc
import os
import re
import zlib

from engine.errors import RecordingError
from engine.stream import limits
from engine.stream.reader.lines import (CHECK_PREFIX, DECODE_ERRORS, INDEX_PREFIX,
                                        RECORDER_LINES, TALLY_PREFIX, decode_check,
                                        decode_index, decode_record, decode_tally,
                                        display_name, parse_header, reason, schema_of)
from engine.stream.reader.source import read_all
from engine.stream.reader.zstdframes import (ZSTD_MAGIC, ZstdDamage, ZstdLimitError,
                                             decompress)
from engine.stream.records import EngineAborted, RunFinished, StepRecord, V1StepRecord
from engine.stream.run import Recording, Run

_BLOCK_END = b"\n" + CHECK_PREFIX
MAX_PROBLEMS_KEPT = 20  # lenient reads count every problem but describe only the first few
_MIN_LINE_BYTES = 16  # no record's line is shorter (the shortest, a policy change, is ~70)
_TOO_LONG = b"\x00a line over MAX_LINE_BYTES\x00"  # its stand-in, compared by identity


# ---- a whole file ---------------------------------------------------------------------------

def load(path: str | os.PathLike[str], lenient: bool = False,
         into: type[Recording] = Recording) -> Recording:
    """Read a whole recording ("-" is stdin) into an indexed Recording (a Run).

    Raises RecordingError for a damaged file; a cut one loads what was sealed and sets
    `truncated` (see `notes` for what to tell the user).
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
    data = read_all(path)
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


def _has_checks(text: bytes) -> bool:
    """Whether the recording carries Check lines (schema >= 2), judged from its header."""
    newline = text.find(b"\n")
    schema = schema_of(text[:newline if newline >= 0 else len(text)])
    return schema is not None and schema >= 2


def _span(first: int, last: int) -> str:
    return f"line {first}" if first == last else f"lines {first}-{last}"


class _Reader:
    """The state of one load: where the stream is, and what to do with a violation."""

    def __init__(self, run: Run, name: str, lenient: bool) -> None:
        self.run = run
        self.name = name
        self.lenient = lenient
        header = run.header
        self.expected = header.starts_at_step if header is not None else 0  # next step
        self.ended = False  # a RunFinished was accepted
        self.aborted = False

    def problem(self, lineno: int, text: str, lines: int = 1) -> None:
        """A violation at `lineno`: raise, or (lenient) count `lines` skipped and note it."""
        if not self.lenient:
            raise RecordingError(f"{self.name}:{lineno}: {text}; run with --lenient to skip "
                                 f"what is damaged and read the rest")
        run = self.run
        run.skipped_lines += lines
        run.problem_count += 1
        if len(run.problems) < MAX_PROBLEMS_KEPT:
            run.problems.append(f"line {lineno}: {text}")

    # -- records ---------------------------------------------------------------------------

    def decode_lines(self, lines: list[bytes], lineno: int, keep: bool = True,
                     size: int | None = None) -> bool:
        """Decode and check `lines` (the first is line `lineno`); append the good ones to the
        run if `keep`. Returns False if any line was bad. The loop is the loader's hot path:
        the common case (the next step, within bounds) costs a few comparisons. `size`: the
        lines' bytes, if the caller knows them (no line is longer than all of them)."""
        decode = decode_record
        append = self.run.append
        if (size if size is not None else sum(map(len, lines))) > limits.MAX_LINE_BYTES:
            lines = list(lines)
            for i, line in enumerate(lines):
                if len(line) > limits.MAX_LINE_BYTES:
                    self.problem(lineno + i, f"line is {len(line):,} bytes, longer than the "
                                             f"reader's limit of {limits.MAX_LINE_BYTES:,}")
                    lines[i] = _TOO_LONG  # reported: now just skipped
        ok = True
        expected = self.expected
        over = self.ended or self.aborted  # a step after the end or the abort breaks a rule
        for line in lines:
            try:
                item = decode(line)
            except DECODE_ERRORS as exc:
                if line is _TOO_LONG:
                    ok = False  # reported above
                else:
                    ok = self._corrupt(line, lineno, exc)
                lineno += 1
                continue
            kind = type(item)
            if kind is StepRecord or kind is V1StepRecord:
                if (item.step != expected or item.gpu_used > item.gpu_total
                        or item.cpu_used > item.cpu_total or over):
                    self.expected = expected
                    if not self._odd_step(item, lineno):
                        ok = False
                        lineno += 1
                        continue
                expected = item.step + 1
            elif kind is EngineAborted or kind is RunFinished:
                self.expected = expected
                why = self._end_problem(item)
                over = self.ended or self.aborted
                if why is not None:
                    self.problem(lineno, why)
                    ok = False
                    lineno += 1
                    continue
            elif self.ended:
                self.problem(lineno, f"a {kind.__name__} record after the end record")
                ok = False
                lineno += 1
                continue
            if keep:
                append(item)
            lineno += 1
        self.expected = expected
        return ok

    def _corrupt(self, line: bytes, lineno: int, exc: BaseException) -> bool:
        if isinstance(exc, RecursionError):
            why = "nested deeper than the reader allows"
        elif line.startswith(CHECK_PREFIX):
            why = f"misplaced or damaged check line ({reason(exc)})"
        elif not line.strip():
            why = "blank line"
        else:
            why = f"corrupt line ({reason(exc)})"
        self.problem(lineno, why)
        return False

    def _odd_step(self, step: StepRecord, lineno: int) -> bool:
        """A step that breaks a rule: report it; True if a lenient read may still keep it."""
        if self.ended or self.aborted:
            after = "end record" if self.ended else "abort"
            self.problem(lineno, f"step {step.step} after the {after}")
            return False
        for used, total, what in ((step.gpu_used, step.gpu_total, "GPU"),
                                  (step.cpu_used, step.cpu_total, "CPU")):
            if used > total:
                self.problem(lineno, f"step {step.step}: {used:,} {what} blocks used of "
                                     f"{total:,}")
                return False
        if step.step < self.expected:
            self.problem(lineno, f"step {step.step} again or out of order (expected step "
                                 f"{self.expected}): lines were repeated or reordered")
            return False
        if step.step - self.expected > limits.MAX_GAP_STEPS:
            self.problem(lineno, f"step {step.step} where step {self.expected} was expected: "
                                 f"a damaged step number")
            return False
        self.problem(lineno, f"steps {self.expected}-{step.step - 1} are missing (step "
                             f"{step.step} follows step {self.expected - 1})", lines=0)
        return True  # lenient: keep it; the Run shows the gap as such

    def _end_problem(self, item: EngineAborted | RunFinished) -> str | None:
        if self.ended:
            return f"a second end record ({type(item).__name__})"
        if type(item) is EngineAborted:
            if self.aborted:
                return "a second abort record"
            if item.gpu_used > item.gpu_total or item.cpu_used > item.cpu_total:
                return "abort record: more blocks used than exist"
            if item.step != self.expected:
                return (f"abort at step {item.step}, but the steps before it end at step "
                        f"{self.expected - 1}")
            self.aborted = True
            return None
        if item.steps != self.expected:
            return (f"the end record counts {item.steps:,} steps, but the file's steps end "
                    f"at step {self.expected - 1} (steps were lost or added)")
        self.ended = True
        return None


def _blank_lines(text: bytes) -> bool:
    return text.startswith(b"\n") or b"\n\n" in text


def _split_unblank(reader: _Reader, text: bytes, lineno: int) -> list[bytes]:
    """Split `text` into lines; blank lines (never written by the recorder) are a violation,
    and in lenient mode are removed before splitting, so a file of a billion newlines costs
    one pass, not a billion list entries."""
    if _blank_lines(text):
        if not reader.lenient:
            before = text.find(b"\n\n")
            first = 0 if text.startswith(b"\n") else text.count(b"\n", 0, before + 1)
            reader.problem(lineno + first, "blank line")
        collapsed = re.sub(rb"\n\n+", b"\n", text).lstrip(b"\n")
        removed = text.count(b"\n") - collapsed.count(b"\n")
        reader.problem(lineno, f"{removed:,} blank line(s) removed", lines=removed)
        text = collapsed
    return text.split(b"\n")


# ---- schema >= 2: blocks sealed by Check lines --------------------------------------------

def load_checked(data: bytes, run: Run, name: str, lenient: bool, verified: int = 0) -> None:
    """Read `data` (header line first) into `run`, block by block. Sets `truncated`,
    `cut_note`, `skipped_lines` and `problems`; raises RecordingError unless `lenient`.
    `verified`: the first bytes that zstd's content checksums already proved (no CRC)."""
    reader = _Reader(run, name, lenient)
    find, count = data.find, data.count
    view = memoryview(data)
    start = 0  # the current block's first byte; block 0 holds the header line
    lineno = 1  # the current block's first line number
    seq = 0  # the next Check's expected seq
    final = False
    while True:
        cut_check = False
        at = find(_BLOCK_END, max(start - 1, 0))
        if at < 0:
            break
        check_start = at + 1
        check_end = find(b"\n", check_start)
        if check_end < 0:
            cut_check = True
            break
        why = None
        lines: list[bytes] | None = None
        try:
            check = decode_check(view[check_start:check_end])
        except DECODE_ERRORS as exc:
            check = None
            why = f"damaged check line ({reason(exc)})"
        if check is not None:
            # Split at most as many times as the Check claims, and only if that many lines
            # fit in the block (a record line is far longer than MIN_LINE_BYTES): a forged
            # claim of a billion lines cannot make a billion-entry list.
            if check.lines * _MIN_LINE_BYTES <= check_start - start:
                lines = data[start:check_start].split(b"\n", check.lines)
                if len(lines) != check.lines + 1 or lines[-1]:
                    lines = None
            if lines is None:
                n = count(b"\n", start, check_start)
                why = (f"the check counts {check.lines} line(s), there are {n}: lines were "
                       f"added or deleted")
        n_lines = len(lines) - 1 if lines is not None else count(b"\n", start, check_start)
        check_lineno = lineno + n_lines
        block = _span(lineno, check_lineno - 1) if n_lines else f"before line {check_lineno}"
        if final:
            why = f"{block}: data after the recorder's final check (appended to the file)"
        elif why is not None:
            why = f"{why}: {block}" if check is not None else f"{why}: {block} cannot be checked"
        elif check.seq < seq:
            why = (f"flush {check.seq} again after flush {seq - 1} ({block}): a block or "
                   f"zstd frame was repeated or reordered")
        elif check_start > verified and check.crc != zlib.crc32(view[start:check_start]):
            why = f"{block} do not match their checksum: bytes in them were changed"
        if why is not None:
            reader.problem(check_lineno, why, lines=n_lines + 1)
            if check is None or (check.seq == seq and not final):
                seq += 1  # a damaged check most likely stood for the next flush
        else:
            if check.seq > seq:
                reader.problem(check_lineno, f"flush(es) {seq}-{check.seq - 1} are missing "
                                             f"before {block}: a block or zstd frame was "
                                             f"lost", lines=0)
            seq = check.seq + 1
            final = check.final
            lines.pop()  # the block ends with a newline
            if final and lines and lines[-1].startswith(INDEX_PREFIX):
                _take_index(reader, lines.pop(), check_lineno - 1)
            elif lines and lines[-1].startswith(TALLY_PREFIX):
                _take_tally(reader, lines.pop(), check_lineno - 1)
            if start == 0:
                reader.decode_lines(lines[1:], lineno + 1)  # the header line is parsed
            else:
                reader.decode_lines(lines, lineno, size=check_start - start)
        start = check_end + 1
        lineno = check_lineno + 1
    if start == 0:  # not one Check: the tail starts after the header line
        header_end = find(b"\n")
        start, lineno = (len(data), 1) if header_end < 0 else (header_end + 1, 2)
    _tail(reader, data[start:], lineno, final, cut_check)


def _take_index(reader: _Reader, line: bytes, lineno: int) -> None:
    """The recorder's index (the line before its final Check): kept, not a record of the run.
    Its place and its checksum are proved by now; whether it agrees with the records is
    `index_disagrees`'s business once they are read."""
    try:
        reader.run.index = decode_index(line)
    except DECODE_ERRORS as exc:
        reader.problem(lineno, f"damaged index line ({reason(exc)})")


def _take_tally(reader: _Reader, line: bytes, lineno: int) -> None:
    """The recorder's tally (the last line of its last data block): kept, not a record."""
    try:
        reader.run.tally = decode_tally(line)
    except DECODE_ERRORS as exc:
        reader.problem(lineno, f"damaged tally line ({reason(exc)})")


def index_disagrees(run: Run, frame_starts: list[int] | None) -> str | None:
    """What in `run.index` contradicts the records just read (and, for a `.zst`, the frames'
    byte offsets), or None. An index that passed its checksum yet disagrees was written by a
    broken recorder or forged with a new checksum: either way `summary` must not trust it."""
    index = run.index
    if index is None:
        return None
    steps = run.steps
    held = (len(run), steps[0].step if steps else None, steps[-1].step if steps else None,
            run.finished is not None)
    said = (index.steps, index.first_step, index.last_step, index.finished)
    if held != said:
        return (f"the index says {said[0]} steps ({said[1]}..{said[2]}, finished {said[3]}), "
                f"the file holds {held[0]} ({held[1]}..{held[2]}, finished {held[3]})")
    if frame_starts is not None:
        offsets = [offset for offset, _ in index.frames]
        if offsets != frame_starts[:len(offsets)] or len(frame_starts) != len(offsets) + 1 \
                or frame_starts[-1] != index.index_offset:
            return "the index's frame offsets are not where the file's zstd frames start"
    previous = -1
    for offset, first in index.frames:
        if offset <= previous:
            return "the index's frame offsets are not in order"
        previous = offset
    return None


def _tail(reader: _Reader, tail: bytes, lineno: int, final: bool, cut_check: bool) -> None:
    """What follows the last complete Check line: nothing, in a whole file."""
    run = reader.run
    if final:
        if tail.strip():
            reader.problem(lineno, f"{len(tail):,} byte(s) after the recorder's final check "
                                   f"(appended to the file)", lines=tail.count(b"\n") or 1)
        return
    lines = _split_unblank(reader, tail, lineno) if tail else []
    cut_line = lines.pop() if lines else b""  # b"" when the tail ends with a newline
    if cut_check:
        cut_line = b""  # a Check line cut short: its block is the unverified tail
    # Complete lines here were written but never sealed: a writer killed mid-flush leaves
    # them. They must at least decode; they are not kept, since nothing vouches for them.
    # The recorder's own lines (a cut can leave the tally or the index unsealed) are not
    # records; a Check line here means the one before it did not match.
    complete = [line for line in lines if not line.startswith(RECORDER_LINES)]
    if any(line.startswith(CHECK_PREFIX) for line in lines) and not cut_check:
        reader.problem(lineno, "damaged check line after the last good one")
    reader.decode_lines(complete, lineno, keep=False)
    dropped = len(lines) + (1 if cut_line else 0)
    last_is_end = bool(run.items) and type(run.items[-1]) is RunFinished
    if dropped == 0 and last_is_end:
        return  # the end record and its flush are there; only the closing mark is missing
    run.truncated = True
    at = f"after step {run.last_step}" if run.steps else "before the first step"
    unsealed = (f"; {dropped} line(s) after the last complete flush were dropped (not "
                f"sealed by a check)" if dropped else "")
    run.cut_note = f"the file is cut {at} (the writer stopped before closing it){unsealed}"


# ---- schema 1: no Check lines ----------------------------------------------------------

def load_unchecked(data: bytes, run: Run, name: str, lenient: bool) -> None:
    """A schema 1 recording: the record rules apply, flipped bytes cannot be found."""
    reader = _Reader(run, name, lenient)
    run.unchecked = True
    header_end = data.find(b"\n")
    lines = _split_unblank(reader, data[header_end + 1:], 2) if header_end >= 0 else []
    tail = lines.pop() if lines else b""
    truncated = False
    if tail:
        try:
            decode_record(tail)
            lines.append(tail)  # complete but unterminated: the cut fell before its newline
        except DECODE_ERRORS:
            truncated = True  # a cut last line
    reader.decode_lines(lines, 2)
    if truncated or not reader.ended:
        run.truncated = True
        at = f"after step {run.last_step}" if run.steps else "before the first step"
        how = "its last line is cut" if truncated else "it has no end record"
        run.cut_note = f"the file is cut {at} ({how}: the writer stopped mid-run)"


# ---- what to tell the user -----------------------------------------------------------------

def notes(run: Run) -> list[str]:
    """One line each: what a command must say before printing numbers from `run`."""
    out = []
    if run.unchecked:
        out.append(f"note: {run.path}: written before recordings carried checks (schema "
                   f"{run.header.schema if run.header else '?'}): changed bytes cannot be "
                   f"detected, so it cannot be fully checked")
    if run.truncated and run.problem_count:
        out.append(f"warning: {run.path}: the readable part ends after step {run.last_step}; "
                   f"nothing after it could be read")
    elif run.truncated:
        out.append(f"warning: {run.path}: {run.cut_note}; the numbers cover the "
                   f"{len(run):,} steps before the cut")
    elif run.finished is None and run.header is not None and not run.problem_count:
        out.append(f"note: {run.path}: the recording was switched off after step "
                   f"{run.last_step}; the run went on without it")
    if run.problem_count:
        more = (f" (and {run.problem_count - len(run.problems)} more)"
                if run.problem_count > len(run.problems) else "")
        out.append(f"warning: {run.path}: DAMAGED: {run.problem_count} problem(s), "
                   f"{run.skipped_lines:,} line(s) skipped by --lenient; the numbers cover "
                   f"only what could be read: {'; '.join(run.problems[:3])}{more}")
    return out
