"""Read recordings: whole files into an indexed run (`load`), or growing ones as a stream
(`follow`).

Why it looks like this:

- Loading must be fast (100,000 steps in well under a second) and must never pay vLLM's or
  torch's import: this module needs only msgspec (and zstandard for `.zst`).
- Nothing in a file is ever executed: lines decode into the typed records of engine.records.
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
from bisect import bisect_left, bisect_right
from typing import Any, Callable, Iterator

import msgspec

from engine.errors import ConfigError
from engine.records import (SCHEMA_VERSION, Arrivals, EngineAborted, Header, LogLine,
                            PolicyChanged, Record, RunFinished, StepRecord)

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_CHUNK = 1 << 20

_line_decoder = msgspec.json.Decoder(Record)
_any_decoder = msgspec.json.Decoder()


class RecordingError(ConfigError):
    """A recording that cannot be read; the message names the file and, if known, the line."""


# ---- the indexed run ----------------------------------------------------------------------

# Step-derived event kinds: steps where something happened, for "jump to next swap-out".
_STEP_KINDS: dict[str, Callable[[StepRecord], bool]] = {
    "swap_out": lambda s: bool(s.swapped_out),
    "swap_in": lambda s: bool(s.swapped_in),
    "recompute": lambda s: bool(s.recomputed),
    "ignored": lambda s: bool(s.ignored),
    "withheld": lambda s: s.withheld,
}
# Record kinds, by the `kind` tag they carry in the file.
_RECORD_KINDS: dict[type, str] = {Arrivals: "arrivals", PolicyChanged: "policy",
                                  EngineAborted: "abort", LogLine: "log", RunFinished: "end"}
EVENT_KINDS: tuple[str, ...] = (*_STEP_KINDS, *_RECORD_KINDS.values())


def _numeric_fields() -> dict[str, Callable[[StepRecord], float]]:
    getters: dict[str, Callable[[StepRecord], float]] = {}
    for field in msgspec.structs.fields(StepRecord):
        if field.type in (int, float, bool):
            getters[field.name] = (lambda n: lambda s: float(getattr(s, n)))(field.name)
    getters.update({
        "gpu_pct": lambda s: s.gpu_pct,
        "cpu_pct": lambda s: s.cpu_pct,
        "prefill_tokens": lambda s: float(sum(t for _, t in s.prefills)),
        "n_prefills": lambda s: float(len(s.prefills)),
        "n_swapped_out": lambda s: float(len(s.swapped_out)),
        "n_swapped_in": lambda s: float(len(s.swapped_in)),
        "n_recomputed": lambda s: float(len(s.recomputed)),
        "n_finished": lambda s: float(len(s.finished)),
        "n_first_tokens": lambda s: float(len(s.first_tokens)),
    })
    return getters


SERIES: dict[str, Callable[[StepRecord], float]] = _numeric_fields()
"""Names `Recording.series()` accepts: every numeric StepRecord field plus a few derived ones."""


class Recording:
    """One run, indexed: step N in O(1), next/previous event of a kind by bisection, and cached
    per-step series for plots. `append()` keeps the indexes current, so a follower can build one
    incrementally from `follow()`."""

    def __init__(self, header: Header, path: str = "<memory>") -> None:
        self.path = path
        self.header = header
        self.items: list[Record] = []  # every record after the header, in order
        self.steps: list[StepRecord] = []  # index = step - first_step
        self.first_step: int = header.starts_at_step
        self.abort: EngineAborted | None = None
        self.finished: RunFinished | None = None
        self.truncated = False  # the last line (or zstd frame) was cut
        self.skipped_lines = 0  # corrupt lines skipped in lenient mode
        self._events: dict[str, list[Record]] = {k: [] for k in _RECORD_KINDS.values()}
        self._event_steps: dict[str, list[int]] = {k: [] for k in EVENT_KINDS}
        self._series: dict[str, list[float]] = {}
        self._gaps = False  # steps are contiguous unless lenient loading skipped one
        self._step_numbers: list[int] | None = None

    # building

    def append(self, item: Record) -> None:
        self.items.append(item)
        if type(item) is StepRecord:
            if not self.steps:
                self.first_step = item.step
            elif item.step != self.steps[-1].step + 1:
                self._step_numbers = None  # a gap (a skipped corrupt line): index by bisection
                self._gaps = True
            self.steps.append(item)
            for kind, happened in _STEP_KINDS.items():
                if happened(item):
                    self._event_steps[kind].append(item.step)
            return
        kind = _RECORD_KINDS[type(item)]
        self._events[kind].append(item)
        self._event_steps[kind].append(getattr(item, "step", self.last_step or 0))
        if type(item) is EngineAborted:
            self.abort = item
        elif type(item) is RunFinished:
            self.finished = item

    # random access

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def last_step(self) -> int | None:
        return self.steps[-1].step if self.steps else None

    def step(self, n: int) -> StepRecord:
        """The record of step `n` (absolute step number); IndexError if not recorded."""
        i = n - self.first_step
        if self._gaps:
            if self._step_numbers is None or len(self._step_numbers) != len(self.steps):
                self._step_numbers = [s.step for s in self.steps]
            i = bisect_left(self._step_numbers, n)
            if i < len(self.steps) and self.steps[i].step != n:
                i = -1
        if not 0 <= i < len(self.steps):
            raise IndexError(f"step {n} is not in {self.path} "
                             f"(it holds steps {self.first_step}..{self.last_step})")
        return self.steps[i]

    def events(self, kind: str) -> list[Any]:
        """Records of a record kind ("policy", "arrivals", ...) or steps of a step kind."""
        self._check_kind(kind)
        if kind in _STEP_KINDS:
            return [self.step(n) for n in self._event_steps[kind]]
        return list(self._events[kind])

    def event_steps(self, kind: str) -> list[int]:
        self._check_kind(kind)
        return self._event_steps[kind]

    def next_event(self, kind: str, step: int) -> int | None:
        """The first step after `step` at which an event of `kind` happened, or None."""
        steps = self.event_steps(kind)
        i = bisect_right(steps, step)
        return steps[i] if i < len(steps) else None

    def prev_event(self, kind: str, step: int) -> int | None:
        """The last step before `step` at which an event of `kind` happened, or None."""
        steps = self.event_steps(kind)
        i = bisect_left(steps, step)
        return steps[i - 1] if i > 0 else None

    def series(self, name: str) -> list[float]:
        """One float per recorded step (cached; extended as steps are appended)."""
        getter = SERIES.get(name)
        if getter is None:
            raise KeyError(f"unknown series {name!r}; known: {', '.join(SERIES)}")
        values = self._series.setdefault(name, [])
        if len(values) < len(self.steps):
            values.extend(getter(s) for s in self.steps[len(values):])
        return values

    @property
    def policy_changes(self) -> list[PolicyChanged]:
        return self._events["policy"]  # type: ignore[return-value]

    @property
    def arrivals(self) -> list[Arrivals]:
        return self._events["arrivals"]  # type: ignore[return-value]

    def all_items(self) -> list[Header | Record]:
        """Header then records: what a session's subscriber saw, e.g. for summarize()."""
        return [self.header, *self.items]

    @staticmethod
    def _check_kind(kind: str) -> None:
        if kind not in EVENT_KINDS:
            raise KeyError(f"unknown event kind {kind!r}; known: {', '.join(EVENT_KINDS)}")


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


def load(path: str | os.PathLike[str], lenient: bool = False) -> Recording:
    """Read a whole recording ("-" is stdin) into an indexed Recording.

    Raises RecordingError for anything but a cut tail, which sets `truncated`.
    """
    # Decoding allocates millions of small containers, none of them cyclic; without this the
    # cyclic GC runs over and over during a load and doubles its time.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(path, lenient)
    finally:
        if was_enabled:
            gc.enable()


def _load(path: str | os.PathLike[str], lenient: bool) -> Recording:
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
    recording = Recording(header, name)
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
