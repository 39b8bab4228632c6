"""`observatory export`: a recording as CSV (spreadsheets, pandas), as a Perfetto trace, or as a
request trace (`--format trace`: the Mooncake-style JSONL that `--trace` re-runs; its engine's
settings go beside it as a `--config` TOML file).

The Perfetto export is the Chrome trace-event JSON format, which ui.perfetto.dev opens as is.
Timestamps are on the recording's time axis (engine.stream.timeaxis), in microseconds:
- sim: *simulated* time (engine.costmodel), so the timeline shows how long each step would take
  on the GPU class the cost model describes, not how fast the sim ran;
- gpu: *measured* time. A step's slice runs from the end of the previous step to the end of this
  one on the wall clock (everything the engine loop did for it), and a nested `execute_model`
  slice, ending with the step, is the CUDA-synchronised executor time (`exec_s`).
The process name and `otherData.time` say which.

CSV carries every scalar field (sim_s, wall_s and exec_s all), plus `axis_time_s` and
`axis_step_s`: the step's end and duration on the recording's axis, named in `time_axis`, and
`aborted`. A run vLLM aborted ends with one more row, the step it raised in (engine.
conventions): `aborted` True, the queues and blocks vLLM left (so the column's maximum is the
summary's peak and its step the summary's `abort_step`), and blank cells where a decision
would be, since vLLM never returned one. The Perfetto trace marks that step with an instant and
the KV and queue counters vLLM left.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any, Iterator

import msgspec

from engine.kinds import EngineKind, kind_of
from engine.outpath import write_output
from engine.stream.run import ABORT_KNOWN, Recording
from engine.stream.records import StepRecord, V1StepRecord
from engine.stream.timeaxis import GPU, axis_of

FORMATS = ("csv", "perfetto", "trace")

# List fields become counts (and the ids of swaps, which are what one looks for).
_SCALARS = [f.name for f in msgspec.structs.fields(StepRecord)
            if getattr(f.type, "__origin__", f.type) in (int, float, bool, str)]
CSV_COLUMNS = [*_SCALARS, "gpu_pct", "cpu_pct", "prefill_groups", "prefill_tokens",
               "n_swapped_out", "n_swapped_in", "n_recomputed", "n_ignored", "n_finished",
               "n_first_tokens", "swapped_out_ids", "swapped_in_ids", "time_axis",
               "axis_time_s", "axis_step_s", "aborted"]


# A V1 recording (Header.engine "v1") speaks V1: no swap space, recompute preemptions.
_V1_SCALARS = [f.name for f in msgspec.structs.fields(V1StepRecord)
               if getattr(f.type, "__origin__", f.type) in (int, float, bool, str)]
V1_CSV_COLUMNS = [*_V1_SCALARS, "gpu_pct", "n_new", "n_resumed", "n_scheduled",
                  "n_preempted", "lost_tokens", "n_finished", "n_first_tokens",
                  "preempted_ids", "time_axis", "axis_time_s", "axis_step_s", "aborted"]

_STATED = ABORT_KNOWN | {"time_axis", "axis_time_s", "axis_step_s", "aborted"}
"""The columns the aborting step's row fills; the rest are decisions vLLM never returned."""


def _steps(recording: Recording) -> Iterator[tuple[StepRecord | V1StepRecord, bool]]:
    """Each recorded step, then the aborting step if vLLM aborted (engine.conventions)."""
    for s in recording.steps:
        yield s, False
    aborting = recording.aborting_step()
    if aborting is not None:
        yield aborting, True


def _blanked(columns: list[str], row: list[Any], aborting: bool) -> list[Any]:
    if not aborting:
        return row
    return [value if name in _STATED else "" for name, value in zip(columns, row)]


def _v1_csv_rows(recording: Recording) -> Iterator[list[Any]]:
    axis = axis_of(recording.header)
    for s, aborting in _steps(recording):
        yield _blanked(V1_CSV_COLUMNS, [
            *(getattr(s, name) for name in _V1_SCALARS), round(s.gpu_pct, 3), len(s.new),
            len(s.resumed), len(s.scheduled), len(s.preempted), s.lost_tokens,
            len(s.finished), len(s.first_tokens), " ".join(s.recomputed), axis.name,
            axis.clock(s), axis.step_seconds(s), aborting], aborting)


def kind(recording: Recording) -> EngineKind:
    """The engine kind that made `recording` (V0 without a header)."""
    return kind_of(recording.header.engine if recording.header is not None else None)


def default_output(path: str, fmt: str) -> Path:
    """`x.jsonl.zst` -> `x.csv` / `x.perfetto.json`, next to the recording."""
    name = os.path.basename(path) if path != "-" else "stdin"
    for suffix in (".zst", ".jsonl", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    ext = {"csv": ".csv", "perfetto": ".perfetto.json", "trace": ".trace.jsonl"}[fmt]
    return Path(os.path.dirname(path) if path != "-" else ".") / (name + ext)


def csv_rows(recording: Recording) -> Iterator[list[Any]]:
    axis = axis_of(recording.header)
    for s, aborting in _steps(recording):
        yield _blanked(CSV_COLUMNS, [
            *(getattr(s, name) for name in _SCALARS), round(s.gpu_pct, 3),
            round(s.cpu_pct, 3), len(s.prefills), sum(t for _, t in s.prefills),
            len(s.swapped_out), len(s.swapped_in), len(s.recomputed), len(s.ignored),
            len(s.finished), len(s.first_tokens), " ".join(s.swapped_out),
            " ".join(s.swapped_in), axis.name, axis.clock(s), axis.step_seconds(s), aborting],
            aborting)


CSV_OF = {"v0": (CSV_COLUMNS, csv_rows), "v1": (V1_CSV_COLUMNS, _v1_csv_rows)}
"""Each kind's CSV: its columns, and its rows of a recording."""


def to_csv(recording: Recording) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    columns, rows = CSV_OF[kind(recording).name]
    writer.writerow(columns)
    writer.writerows(rows(recording))
    return out.getvalue()


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def _v1_step_events(events: list[dict[str, Any]], s: V1StepRecord, pid: int, tid: int,
                    start: float, dur: float, end_s: float) -> None:
    """One V1 step as trace events: the step slice (new, resumed and running requests with
    their tokens, the preempted with what they lost), the KV counters (GPU and, with one, the
    CPU tier), the requests and the recompute so far, and an instant per preemption step."""
    events.append({
        "ph": "X", "pid": pid, "tid": tid, "name": f"step {s.step}", "cat": "step",
        "ts": _us(start), "dur": _us(dur),
        "args": {"policy": s.policy, "batched_tokens": s.batched_tokens, "exec_s": s.exec_s,
                 "sim_step_s": s.sim_step_s,
                 "new": [f"{rid}:{n}" for rid, n in s.new],
                 "resumed": [f"{rid}:{n}" for rid, n in s.resumed],
                 "decode_reqs": s.decode_reqs,
                 "preempted": [f"{rid} lost {lost} (x{count})"
                               for rid, lost, count in s.preempted],
                 "recomputed_tokens": s.recomputed_tokens,
                 "prefix_hit_tokens": s.prefix_hit_tokens, "finished": s.finished,
                 "withheld": s.withheld, "held_back": s.held_back},
    })
    end = _us(end_s)
    kv = {"gpu": round(s.gpu_pct, 3)}
    if s.cpu_chunks_total:
        kv["cpu_tier"] = round(s.cpu_pct, 3)
    events.append({"ph": "C", "pid": pid, "name": "KV cache %", "ts": end, "args": kv})
    events.append({"ph": "C", "pid": pid, "name": "requests", "ts": end,
                   "args": {"running": s.running, "waiting": s.waiting}})
    events.append({"ph": "C", "pid": pid, "name": "recompute", "ts": end,
                   "args": {"preemptions": s.preemptions_total,
                            "recompute_tax": round(s.recompute_tax, 4)}})
    if s.preempted:
        events.append({"ph": "i", "s": "p", "pid": pid, "tid": tid, "cat": "preempt",
                       "name": f"preempted x{len(s.preempted)}", "ts": _us(start),
                       "args": {"step": s.step,
                                "request_ids": [rid for rid, _, _ in s.preempted],
                                "lost_tokens": s.lost_tokens}})


def perfetto_trace(recording: Recording) -> dict[str, Any]:
    """Chrome trace-event JSON (object form) for ui.perfetto.dev."""
    pid, tid = 1, 1
    header = recording.header
    axis = axis_of(header)
    device = f", {header.device.name}" if axis is GPU and header.device.name else ""
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": pid, "name": "process_name",
         "args": {"name": f"vLLM {header.vllm_version} scheduler ({header.backend}, "
                          f"{header.spec.get('preset', '?')}{device}), {axis.description}"}},
        {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": "steps"}},
    ]
    step_start: dict[int, float] = {}
    previous_end = 0.0
    for s in recording.steps:
        end_s = axis.clock(s)
        if axis is GPU:  # measured: the whole loop iteration, the executor nested at its end
            start, dur = previous_end, max(0.0, end_s - previous_end)
            if s.exec_s > 0:
                events.append({"ph": "X", "pid": pid, "tid": tid, "name": "execute_model",
                               "cat": "exec", "ts": _us(max(start, end_s - s.exec_s)),
                               "dur": _us(min(s.exec_s, dur)), "args": {"exec_s": s.exec_s}})
        else:
            start, dur = end_s - s.sim_step_s, s.sim_step_s
        previous_end = end_s
        step_start[s.step] = start
        if type(s) is V1StepRecord:  # V1's own words: no swap space, recompute preemptions
            _v1_step_events(events, s, pid, tid, start, dur, end_s)
            continue
        events.append({
            "ph": "X", "pid": pid, "tid": tid, "name": f"step {s.step}", "cat": "step",
            "ts": _us(start), "dur": _us(dur),
            "args": {"policy": s.policy, "batched_tokens": s.batched_tokens, "exec_s": s.exec_s,
                     "sim_step_s": s.sim_step_s,
                     "prefills": [f"{rid}:{n}" for rid, n in s.prefills],
                     "decode_groups": s.decode_groups, "decode_seqs": s.decode_seqs,
                     "swapped_out": s.swapped_out, "swapped_in": s.swapped_in,
                     "recomputed": s.recomputed, "finished": s.finished,
                     "withheld": s.withheld, "held_back": s.held_back},
        })
        end = _us(end_s)
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
    last_end = axis.clock(recording.steps[-1]) if recording.steps else 0.0
    for change in recording.policy_changes:
        ts = step_start.get(change.step, last_end)
        events.append({"ph": "i", "s": "g", "pid": pid, "tid": tid, "cat": "policy",
                       "name": f"policy {change.old} -> {change.new}", "ts": _us(ts),
                       "args": {"step": change.step, "source": change.source}})
    abort = recording.abort
    if abort is not None:
        swaps = kind(recording).swaps  # V1 has no swap space: its queues are two
        state = ({"swapped": abort.swapped, "cpu_pct": round(abort.cpu_pct, 3)} if swaps
                 else {"running": abort.running, "waiting": abort.waiting})
        events.append({"ph": "i", "s": "g", "pid": pid, "tid": tid, "cat": "abort",
                       "name": "engine aborted", "ts": _us(axis.clock(abort)),
                       "args": {"step": abort.step, "error": abort.error,
                                "message": abort.message, **state}})
        events.append({"ph": "C", "pid": pid, "name": "KV cache %",
                       "ts": _us(axis.clock(abort)),
                       "args": {"gpu": round(abort.gpu_pct, 3), "cpu": round(abort.cpu_pct, 3)}})
        queues = ({"running": abort.running, "swapped": abort.swapped,
                   "waiting": abort.waiting} if swaps
                  else {"running": abort.running, "waiting": abort.waiting})
        events.append({"ph": "C", "pid": pid, "name": "queues" if swaps else "requests",
                       "ts": _us(axis.clock(abort)), "args": queues})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"recording": recording.path, "started_at": header.started_at,
                          "vllm_version": header.vllm_version,
                          "time": "simulated" if axis is not GPU else "measured",
                          "time_axis": axis.name, "device": msgspec.to_builtins(header.device)}}


def trace_lines(recording: Recording) -> bytes:
    """The recording's requests as a Mooncake-style JSONL trace (engine.traces.mooncake.lines):
    what `--trace` replays, with the fields that make it the recording's exact workload.
    ConfigError (one line) for a recording that has no requests to give."""
    from engine.errors import ConfigError
    from engine.traces import mooncake
    from engine.traces.recording import RecordingTraceError, block_size_of, requests_of

    try:
        requests = requests_of(recording)
    except RecordingTraceError as exc:
        raise ConfigError(str(exc)) from None
    body = b"\n".join(mooncake.lines(requests, block_size_of(recording.header)))
    return body + b"\n" if body else body


def trace_settings(recording: Recording) -> str:
    """The engine a trace exported from `recording` re-runs on, as a `--config` TOML file:
    vLLM's settings as the header records them (engine.analysis.rerun), the policy it started
    with and the recorded policy changes as toggles."""
    from engine.analysis.rerun import trace_engine_fields
    from engine.sweep.toml_out import dumps

    header = "# the engine of {} (observatory export --format trace): run its trace with\n" \
             "# observatory run --config THIS --trace TRACE\n".format(
                 os.path.basename(recording.path))
    return header + dumps(trace_engine_fields(recording)) + "\n"


def render(recording: Recording, fmt: str) -> bytes:
    if fmt == "csv":
        return to_csv(recording).encode()
    if fmt == "perfetto":
        return msgspec.json.encode(perfetto_trace(recording))
    if fmt == "trace":
        return trace_lines(recording)
    raise ValueError(f"unknown export format {fmt!r}")


def export(recording: Recording, fmt: str, out: str) -> int:
    """Write the export to `out` ("-" is stdout); return the number of bytes written.

    A regular file (or a new one, or the one a symlink names) is written beside itself under a
    temporary name and renamed over it only when complete, so a failure (a full disk, an
    interrupt) leaves no partial file and an existing `out` stays as it was; a device, a FIFO
    or /dev/stdout is written in place (engine.outpath)."""
    from engine.errors import ConfigError

    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}: use csv, perfetto or trace")
    data = render(recording, fmt)
    if out == "-":  # a failing stdout is the CLI's to report, as for every command
        write_output(out, data)
        return len(data)
    try:
        write_output(out, data)
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc.strerror or exc}: give another -o OUT") \
            from None
    return len(data)
