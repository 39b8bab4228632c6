"""A trace file as a checked, sliced, paced stream of requests.

`resolve(spec)` pins down which file a run replays before anything runs: its absolute path,
its format (auto-detected once) and its sha256, all stored in the RunSpec and so in the
recording's header. `verify` rebuilds the spec from the header and resolves it again, which
finds the file by that path and refuses, in one line, a file that is gone or has changed.

`TraceSource` reads the rows one by one (never the whole file, except a vllm-bench JSON) and
applies the checks every format shares. A bad row is one line naming the file and the line
(TraceError, exit 2), or with --trace-skip-bad a count in the run's trace stats. The run's clock
starts at the first row's time plus --trace-start, and --trace-speed divides the gaps.
"""

from __future__ import annotations

import csv
import hashlib
import os
from typing import Any, Iterator

import msgspec

from engine.errors import ConfigError
from engine.traces import azure, burstgpt, mooncake, vllm_bench
from engine.traces.detect import FORMATS, detect, head_of
from engine.traces.rows import BadRow, Recorded, TraceError, TraceRow
from engine.traces.stats import TraceStats

_HASH_CHUNK = 1 << 20


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _open_error(path: str, exc: OSError) -> TraceError:
    if isinstance(exc, FileNotFoundError):
        return TraceError(f"trace {path}: no such file (a recording finds its trace by the path "
                          f"in its header: put the file back there)")
    if isinstance(exc, IsADirectoryError):
        return TraceError(f"trace {path}: is a directory: give the trace file")
    return TraceError(f"trace {path}: cannot read it: {exc.strerror or exc}")


def _locate(spec: Any) -> tuple[str, str]:
    """The trace's absolute path and concrete format (its first lines read, not the file).
    Raises TraceError (one line) for a missing, unreadable, empty or unrecognised file."""
    path = os.path.abspath(os.path.expanduser(spec.trace))
    try:
        head = head_of(path)
        if not head.strip():
            raise TraceError(f"trace {path}: the file is empty: nothing to replay")
        return path, detect(path, head) if spec.trace_format == "auto" else spec.trace_format
    except OSError as exc:
        raise _open_error(path, exc) from None


def resolve(spec: Any) -> Any:
    """`spec` with its trace's absolute path, concrete format and sha256 filled in; a spec
    without a trace unchanged. Raises TraceError (one line) for a missing, unreadable, empty or
    unrecognised file, and for one whose sha256 differs from the spec's. The run does this once
    (engine.session), as it starts: hashing reads the whole file."""
    if not spec.trace:
        return spec
    path, fmt = _locate(spec)
    try:
        digest = file_sha256(path)
    except OSError as exc:
        raise _open_error(path, exc) from None
    if spec.trace_sha256 is not None and spec.trace_sha256.lower() != digest:
        raise TraceError(f"trace {path}: its sha256 is {digest[:16]}... and the run names "
                         f"{spec.trace_sha256[:16]}...: the file changed since it was recorded "
                         f"(restore it; a new run of the changed file records its own sha256)")
    return msgspec.structs.replace(spec, trace=path, trace_format=fmt, trace_sha256=digest)


def check(spec: Any) -> None:
    """What a command checks before anything loads: the same one-line refusals as `resolve`,
    without hashing the file (the run hashes it once, as it starts) unless the spec names the
    sha256 the file must have."""
    if not spec.trace:
        return
    if spec.trace_sha256 is not None:
        resolve(spec)
        return
    _locate(spec)


class TraceRequest:
    """One replayed row: its line (the request's id), arrival on the run's clock, lengths, and
    what a recording adds (rows.Recorded, or None)."""

    __slots__ = ("line", "arrival_s", "input_len", "output_len", "hash_ids", "recorded")

    def __init__(self, line: int, arrival_s: float, input_len: int, output_len: int,
                 hash_ids: list[int] | None, recorded: Recorded | None = None) -> None:
        self.line = line
        self.arrival_s = arrival_s
        self.input_len = input_len
        self.output_len = output_len
        self.hash_ids = hash_ids
        self.recorded = recorded


class TraceSource:
    """The requests of a resolved spec's trace, checked against the model's context."""

    def __init__(self, spec: Any, max_model_len: int) -> None:
        self.spec = spec
        self.path: str = spec.trace
        self.max_model_len = max_model_len
        self.stats = TraceStats(file=os.path.basename(self.path), format=spec.trace_format)

    def _rows(self) -> Iterator[TraceRow | BadRow]:
        fmt, path = self.spec.trace_format, self.path
        if fmt not in FORMATS:
            raise TraceError(f"trace {path}: unknown format {fmt!r}: give one of "
                             f"{', '.join(FORMATS)}")
        try:
            if fmt == "recording":
                from engine.traces import recording

                yield from recording.rows(path)
            elif fmt == "mooncake":
                with open(path, "rb") as f:
                    yield from mooncake.rows(f)
            elif fmt == "vllm-bench":
                with open(path, "rb") as f:
                    data = f.read()
                yield from vllm_bench.rows(data, f"trace {path}")
            else:
                reader = azure.rows if fmt == "azure" else burstgpt.rows
                with open(path, "r", encoding="utf-8", errors="replace", newline="") as f:
                    yield from _csv_guarded(reader(f, f"trace {path}"), path)
        except OSError as exc:
            raise _open_error(path, exc) from None

    def requests(self) -> Iterator[TraceRequest]:
        """The slice of the trace the spec asks for, in order; raises TraceError at the first
        bad row unless the spec skips them."""
        spec, stats = self.spec, self.stats
        start, speed, limit = spec.trace_start, spec.trace_speed, spec.trace_limit
        skip = spec.trace_skip_bad
        max_len = self.max_model_len
        first_s: float | None = None
        last_s = float("-inf")
        last_line = 0
        kept = 0
        if limit is not None and limit <= 0:
            return
        for row in self._rows():
            what = row.what if type(row) is BadRow else self._check(row, last_s, last_line,
                                                                   max_len)
            if what is not None:
                if not skip:
                    raise TraceError(f"trace {self.path}: line {row.line}: {what} (fix the line, "
                                     f"or give --trace-skip-bad to skip bad lines)", row.line)
                stats.skipped += 1
                if stats.first_skipped_line is None:
                    stats.first_skipped_line = row.line
                continue
            last_s, last_line = row.time_s, row.line
            if first_s is None:  # a row pinned to its step keeps its recording's clock
                pinned = row.recorded is not None and row.recorded.step is not None
                first_s = 0.0 if pinned else row.time_s
            offset = row.time_s - first_s - start
            if offset < 0:
                continue
            kept += 1
            output = row.output_len
            if output == 0:
                stats.zero_outputs += 1
                output = 1
            if row.input_len + output > max_len:
                stats.capped += 1
            stats.requests += 1
            stats.prompt_tokens += row.input_len
            stats.output_tokens += row.output_len
            yield TraceRequest(row.line, offset / speed, row.input_len, output, row.hash_ids,
                               row.recorded)
            if limit is not None and kept >= limit:
                return
        if not kept:
            after = f" at or after --trace-start {start:g} s" if start else ""
            skipped = f" ({stats.skipped} bad lines skipped)" if stats.skipped else ""
            raise TraceError(f"trace {self.path}: no request to replay{after}{skipped}")

    @staticmethod
    def _check(row: TraceRow, last_s: float, last_line: int, max_len: int) -> str | None:
        """What is wrong with a decoded row, or None."""
        if row.input_len < 0 or row.output_len < 0:
            which = "input" if row.input_len < 0 else "output"
            return f"a negative {which} length ({min(row.input_len, row.output_len)})"
        if row.input_len == 0:
            return "an input length of 0: vLLM needs a prompt of at least 1 token"
        if row.time_s != row.time_s or row.time_s in (float("inf"), float("-inf")):
            return "the time is not a finite number"
        if row.time_s < last_s:
            return (f"time goes backwards ({row.time_s - last_s:+.3f} s from line {last_line}): "
                    f"a trace must be in arrival order")
        if row.input_len >= max_len:
            return (f"a prompt of {row.input_len:,} tokens does not fit the model's context of "
                    f"{max_len:,} (it needs room for 1 output token): use a longer-context "
                    f"--model")
        return None


def model_context(spec: Any) -> int | None:
    """The context the engine for `spec` will have, known before it is built: --max-model-len,
    or the model config's (a packaged sim model, or a local directory), the smaller; None where
    only vLLM can tell (a Hugging Face id, RoPE scaling)."""
    from engine.adapters.build_shared import sim_model_dir
    from engine.adapters.models import config_context

    try:
        model_dir = sim_model_dir(spec.model_name)
    except ConfigError:
        model_dir = None
    derived = config_context(model_dir) if model_dir is not None else None
    given = spec.max_model_len
    if given is None or derived is None:
        return given if derived is None else derived
    return min(given, derived)


def check_fits(spec: Any) -> int:
    """Read the spec's trace slice once against the model's context before the engine is
    built (on V1 that took 48 s, and only then was a line too long refused); raises the
    TraceError the run would (or skips, with --trace-skip-bad). The number of requests."""
    context = model_context(spec)
    if context is None:
        return 0
    return sum(1 for _ in TraceSource(spec, context).requests())


def _csv_guarded(rows: Iterator[TraceRow | BadRow], path: str) -> Iterator[TraceRow | BadRow]:
    """A CSV reader's rows, its csv.Error (a NUL byte, an unclosed quote at the end) as one
    TraceError naming where the reader stopped."""
    line = 0
    try:
        for row in rows:
            line = row.line
            yield row
    except csv.Error as exc:
        raise TraceError(f"trace {path}: after line {line}: not CSV ({exc}): a damaged file?",
                         line + 1) from None
