"""`observatory export`: a recording as CSV (spreadsheets, pandas) or as a Perfetto trace.

The Perfetto export is the Chrome trace-event JSON format, which ui.perfetto.dev opens as is.
Timestamps are *simulated* time (engine.costmodel) in microseconds, so the timeline shows how
long each step would take on the GPU class the cost model describes, not how fast the sim ran.
"""

from __future__ import annotations

import csv
import io
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import msgspec

from engine.stream.run import Recording
from engine.stream.records import StepRecord

FORMATS = ("csv", "perfetto")

# List fields become counts (and the ids of swaps, which are what one looks for).
_SCALARS = [f.name for f in msgspec.structs.fields(StepRecord)
            if f.type in (int, float, bool, str)]
CSV_COLUMNS = [*_SCALARS, "gpu_pct", "cpu_pct", "prefill_groups", "prefill_tokens",
               "n_swapped_out", "n_swapped_in", "n_recomputed", "n_ignored", "n_finished",
               "n_first_tokens", "swapped_out_ids", "swapped_in_ids"]


def default_output(path: str, fmt: str) -> Path:
    """`x.jsonl.zst` -> `x.csv` / `x.perfetto.json`, next to the recording."""
    name = os.path.basename(path) if path != "-" else "stdin"
    for suffix in (".zst", ".jsonl", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    ext = ".csv" if fmt == "csv" else ".perfetto.json"
    return Path(os.path.dirname(path) if path != "-" else ".") / (name + ext)


def csv_rows(recording: Recording) -> Iterator[list[Any]]:
    for s in recording.steps:
        yield [*(getattr(s, name) for name in _SCALARS), round(s.gpu_pct, 3),
               round(s.cpu_pct, 3), len(s.prefills), sum(t for _, t in s.prefills),
               len(s.swapped_out), len(s.swapped_in), len(s.recomputed), len(s.ignored),
               len(s.finished), len(s.first_tokens), " ".join(s.swapped_out),
               " ".join(s.swapped_in)]


def to_csv(recording: Recording) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(csv_rows(recording))
    return out.getvalue()


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def perfetto_trace(recording: Recording) -> dict[str, Any]:
    """Chrome trace-event JSON (object form) for ui.perfetto.dev."""
    pid, tid = 1, 1
    header = recording.header
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": pid, "name": "process_name",
         "args": {"name": f"vLLM {header.vllm_version} scheduler ({header.backend}, "
                          f"{header.spec.get('preset', '?')}), simulated time"}},
        {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": "steps"}},
    ]
    step_start: dict[int, float] = {}
    for s in recording.steps:
        start = s.sim_s - s.sim_step_s
        step_start[s.step] = start
        events.append({
            "ph": "X", "pid": pid, "tid": tid, "name": f"step {s.step}", "cat": "step",
            "ts": _us(start), "dur": _us(s.sim_step_s),
            "args": {"policy": s.policy, "batched_tokens": s.batched_tokens,
                     "prefills": [f"{rid}:{n}" for rid, n in s.prefills],
                     "decode_groups": s.decode_groups, "decode_seqs": s.decode_seqs,
                     "swapped_out": s.swapped_out, "swapped_in": s.swapped_in,
                     "recomputed": s.recomputed, "finished": s.finished,
                     "withheld": s.withheld, "held_back": s.held_back},
        })
        end = _us(s.sim_s)
        events.append({"ph": "C", "pid": pid, "name": "KV cache %", "ts": end,
                       "args": {"gpu": round(s.gpu_pct, 3), "cpu": round(s.cpu_pct, 3)}})
        events.append({"ph": "C", "pid": pid, "name": "queues", "ts": end,
                       "args": {"running": s.running, "swapped": s.swapped,
                                "waiting": s.waiting}})
        if s.swapped_out:
            events.append({"ph": "i", "s": "p", "pid": pid, "tid": tid, "cat": "swap",
                           "name": f"swap-out x{len(s.swapped_out)}", "ts": _us(start),
                           "args": {"step": s.step, "request_ids": s.swapped_out}})
        if s.swapped_in:
            events.append({"ph": "i", "s": "p", "pid": pid, "tid": tid, "cat": "swap",
                           "name": f"swap-in x{len(s.swapped_in)}", "ts": _us(start),
                           "args": {"step": s.step, "request_ids": s.swapped_in}})
    last_end = recording.steps[-1].sim_s if recording.steps else 0.0
    for change in recording.policy_changes:
        ts = step_start.get(change.step, last_end)
        events.append({"ph": "i", "s": "g", "pid": pid, "tid": tid, "cat": "policy",
                       "name": f"policy {change.old} -> {change.new}", "ts": _us(ts),
                       "args": {"step": change.step, "source": change.source}})
    abort = recording.abort
    if abort is not None:
        events.append({"ph": "i", "s": "g", "pid": pid, "tid": tid, "cat": "abort",
                       "name": "engine aborted", "ts": _us(abort.sim_s),
                       "args": {"step": abort.step, "error": abort.error,
                                "message": abort.message, "swapped": abort.swapped,
                                "cpu_pct": round(abort.cpu_pct, 3)}})
        events.append({"ph": "C", "pid": pid, "name": "KV cache %", "ts": _us(abort.sim_s),
                       "args": {"gpu": round(abort.gpu_pct, 3), "cpu": round(abort.cpu_pct, 3)}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"recording": recording.path, "started_at": header.started_at,
                          "vllm_version": header.vllm_version, "time": "simulated"}}


def render(recording: Recording, fmt: str) -> bytes:
    if fmt == "csv":
        return to_csv(recording).encode()
    if fmt == "perfetto":
        return msgspec.json.encode(perfetto_trace(recording))
    raise ValueError(f"unknown export format {fmt!r}")


def export(recording: Recording, fmt: str, out: str) -> int:
    """Write the export to `out` ("-" is stdout); return the number of bytes written.

    A file is written next to `out` under a temporary name and renamed over it only when
    complete, so a failure (a full disk, an interrupt) leaves no partial file, and an existing
    `out` stays as it was."""
    from engine.errors import ConfigError

    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}: use csv or perfetto")
    data = render(recording, fmt)
    if out == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return len(data)
    target = Path(out)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, data)
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc.strerror or exc}") from None
    return len(data)


def write_atomically(target: Path, data: bytes) -> None:
    """`data` at `target`, all or nothing: a temporary file in the same directory, flushed to
    disk, then renamed over `target`; the temporary file is removed if anything fails."""
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
