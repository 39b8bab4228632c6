"""`observatory import-log`: a vLLM log (V0 or V1) in, a reference recording out.

The reference recording is a Header (backend "log"), then LogWindow / LogEvent records in log
order, then RunFinished. Its spec is what the log says about the engine (blocks, chunked
prefill, model, seed) on top of the seed preset; `observatory fit` starts from it.

A V1 log (stats lines with `Waiting:`, see stats.py) gives a header with `engine: "v1"`, a spec
on the `v1-thrash` preset, and windows that carry their engine's index, one series per
data-parallel engine, interleaved as the log interleaves them. A log with both kinds is refused:
they are two runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.analysis.logs.clean import logical_lines
from engine.analysis.logs.events import Event, find_events
from engine.analysis.logs.stats import StatsRecord, find_stats
from engine.analysis.logs.timeline import (STATS_INTERVAL_S, V1_STATS_INTERVAL_S, Timeline,
                                           absolute)
from engine.errors import RecordingError
from engine.spec import preset_spec
from engine.stream.producer import end_record, new_header
from engine.stream.records import Header, LogEvent, LogWindow

MIXED_REFUSAL = ("holds both V0 stats lines (`Swapped:`) and V1 ones (`Waiting:`): two runs; "
                 "split the log and import each part")


@dataclass
class ImportedLog:
    header: Header
    records: list[Any]  # LogWindow | LogEvent | RunFinished, in log order
    windows: list[LogWindow] = field(default_factory=list)
    partial: int = 0
    aborted: bool = False
    warnings: list[str] = field(default_factory=list)


def _spec_from_log(events: list[Event]) -> tuple[dict[str, Any], dict[str, Any]]:
    """RunSpec overrides the log justifies, and everything it said about the engine."""
    overrides: dict[str, Any] = {"backend": "gpu", "enable_chunked_prefill": False}
    said: dict[str, Any] = {}
    for event in events:
        if event.event == "config":
            said.update(event.values)
            if event.values.get("model"):
                overrides["model"] = event.values["model"]
            if str(event.values.get("seed", "")).isdigit():
                overrides["seed"] = int(event.values["seed"])
            if "enable_chunked_prefill" in event.values:
                overrides["enable_chunked_prefill"] = event.values["enable_chunked_prefill"] == "True"
        elif event.event == "blocks":
            said.update(event.values)
            if "gpu_blocks" in event.values:
                overrides["num_gpu_blocks"] = event.values["gpu_blocks"]
                overrides["num_cpu_blocks"] = event.values["cpu_blocks"]
        elif event.event == "kv_size":
            said.update(event.values)  # V1: the KV cache in tokens (`observatory fit` uses it)
        elif event.event == "chunked":
            overrides["enable_chunked_prefill"] = True
            said["chunked_prefill"] = True
    return overrides, said


def import_log(data: bytes | str, source: str = "-") -> ImportedLog:
    """Parse a log; raises RecordingError for a log without any stats record or one that mixes
    V0 and V1 records, or for one of the observatory's own recordings (whose lines hold no
    stats line: "no stats records found" would send the user looking in the wrong place)."""
    head = data[:16].encode() if isinstance(data, str) else bytes(data[:16])
    if head.startswith((b"\x28\xb5\x2f\xfd", b'{"kind":"header"')):
        raise RecordingError(f"{source}: an observatory recording, not a vLLM log: import-log "
                             f"and fit read vLLM's own log (its stats lines); summary, replay "
                             f"and compare read a recording as it is")
    lines = logical_lines(data)
    stats = find_stats(lines)
    v1 = any(s.v1 for s in stats)
    if v1 and not all(s.v1 for s in stats):
        raise RecordingError(f"{source}: {MIXED_REFUSAL}")
    if not stats:
        raise RecordingError(f"{source}: no vLLM stats records (`Avg prompt throughput: ...`) found; "
                          f"start vLLM without --disable-log-stats (LLM(..., "
                          f"disable_log_stats=False)) so it logs one every 5 s")
    events = find_events(lines)
    ordered: list[StatsRecord | Event] = sorted([*stats, *events], key=lambda x: (x.line, x.pos))
    years = [x.stamp[0] for x in ordered if x.stamp and x.stamp[0]]
    year = years[0] if years else 2000
    first_abs = next((absolute(s.stamp, year) for s in stats if s.stamp), None)
    timeline = Timeline([(absolute(x.stamp, year),
                          x.elapsed_s if isinstance(x, Event) else None) for x in ordered],
                        first_abs, _v1_interval(stats) if v1 else STATS_INTERVAL_S)

    records: list[Any] = []
    windows: list[LogWindow] = []
    partial = 0
    abort_seen = False
    last_t: float | None = None
    last_progress: Event | None = None
    for item in ordered:
        elapsed = item.elapsed_s if isinstance(item, Event) else None
        t = timeline.at(absolute(item.stamp, year), elapsed)
        if isinstance(item, StatsRecord):
            v = item.values
            window = LogWindow(t_s=t, clock=item.clock, line=item.line,
                               prompt_tps=v["prompt_tps"], gen_tps=v["gen_tps"],
                               running=v["running"], swapped=v["swapped"], pending=v.get("pending"),
                               gpu_pct=v["gpu_pct"], cpu_pct=v["cpu_pct"],
                               partial=item.partial, missing=item.missing,
                               **(_v1_fields(item) if item.v1 else {}))
            partial += item.partial
            windows.append(window)
            records.append(window)
        elif item.event == "abort":
            if abort_seen:
                continue
            abort_seen = True
            # The traceback has no clock: the abort is no earlier than the last thing before it
            # and, with tqdm, at the bar's final elapsed time (fixed up below).
            records.append(LogEvent(t_s=t if t is not None else last_t, line=item.line,
                                    event="abort", text=item.text))
        elif item.event == "chunked":
            continue
        else:
            if item.event == "progress":
                last_progress = item
            records.append(LogEvent(t_s=t, line=item.line, event=item.event, text=item.text,
                                    mode=item.values.get("mode"), group=item.values.get("group"),
                                    cumulative=item.values.get("cumulative"),
                                    finished=item.values.get("finished"),
                                    total=item.values.get("total"),
                                    values={k: v for k, v in item.values.items()
                                            if item.event in ("config", "blocks", "kv_size")}))
        if t is not None:
            last_t = max(last_t, t) if last_t is not None else t
    if abort_seen:
        abort = next(r for r in records if isinstance(r, LogEvent) and r.event == "abort")
        later = [r.t_s for r in records[records.index(abort):]
                 if isinstance(r, LogEvent) and r.event == "progress" and r.t_s is not None]
        if later:
            abort.t_s = max(later)
        if last_progress is not None:
            abort.finished = last_progress.values.get("finished")
    records.append(end_record("aborted" if abort_seen else "log_end", steps=0,
                              sim_s=last_t or 0.0, wall_s=0.0))

    overrides, said = _spec_from_log(events)
    if v1:
        overrides = {k: v for k, v in overrides.items()
                     if k in ("model", "seed", "num_gpu_blocks")}
        if said.get("enable_prefix_caching") in ("True", "False"):
            overrides["enable_prefix_caching"] = said["enable_prefix_caching"] == "True"
        engines = sorted({s.engine for s in stats if s.engine is not None})
        said["engines"] = engines
        said["stats_interval_s"] = _v1_interval(stats)
    spec = preset_spec("v1-thrash" if v1 else "seed-5578", **overrides)
    said.update({"source": source, "time_zero": timeline.method,
                 "time_zero_uncertainty_s": timeline.uncertainty_s,
                 "stats_records": len(stats), "partial_stats_records": partial})
    header = new_header(vllm_version=str(said.get("version", "?")).lstrip("v"), backend="log",
                        model=spec.model_name, spec=spec.to_dict(), engine_config=said,
                        time_axis="gpu",  # the log's clock: wall seconds on the GPU host
                        engine="v1" if v1 else "v0")
    warnings = [f"line {w.line}: stats record cut; missing {', '.join(w.missing)}"
                for w in windows if w.partial]
    return ImportedLog(header, records, windows, partial, abort_seen, warnings)


def _v1_fields(record: StatsRecord) -> dict[str, Any]:
    v = record.values
    return {"engine": record.engine, "kv_device": record.kv_device,
            "prefix_hit_pct": v.get("prefix_hit_pct"),
            "external_prefix_hit_pct": v.get("external_prefix_hit_pct"),
            "mm_hit_pct": v.get("mm_hit_pct"), "preemptions": v.get("preemptions"),
            "deferred": v.get("deferred"), "waiting": v.get("waiting")}


def _v1_interval(stats: list[StatsRecord]) -> float:
    """V1's logging interval as the log shows it: the median gap between one engine's
    consecutive stamped records (VLLM_LOG_STATS_INTERVAL; an idle engine logs at DEBUG, so a
    log at INFO has longer gaps, never shorter ones), else vLLM's default."""
    last: dict[int | None, float] = {}
    gaps: list[float] = []
    for record in stats:
        t = absolute(record.stamp)
        if t is None:
            continue
        if record.engine in last and t > last[record.engine]:
            gaps.append(t - last[record.engine])
        last[record.engine] = t
    if not gaps:
        return V1_STATS_INTERVAL_S
    gaps.sort()
    return round(gaps[len(gaps) // 2], 3)
