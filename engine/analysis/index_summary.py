"""The summary a recording's index carries (engine.stream.records.Index.summary, folded by the
recorder as the records went by), answered from the index and held to what records it can.

`observatory summary` prints it without reading the records: the reader's indexed mode
(engine.stream.reader) proves the index is this file's and that its summary is the tally sealed
with the records (`vouch`); only a summary builder can say whether that summary agrees with the
records of the frame that holds the tally, which is why the check lives here and not in the
reader. `verify` holds it to every record (engine.analysis.verify.index_summary_disagrees).
"""

from __future__ import annotations

import msgspec

from engine.analysis.summary import (LATER_SUMMARY_FIELDS, SUMMARY_TYPES, Summary,
                                     SummaryBuilder, V1Summary, current_names)
from engine.kinds import kind_of
from engine.stream.reader import IndexDamaged, IndexedFile
from engine.stream.records import STEP_TYPES, EngineAborted, RunFinished


def summary_of(indexed: IndexedFile) -> Summary | V1Summary | None:
    """The index's summary as a Summary or V1Summary, or None (none, or not one this
    observatory can trust to say everything it prints)."""
    raw = indexed.index.summary
    if raw is None:
        return None
    kind = kind_of(raw.get("engine"))
    if kind.watches_stalls and "longest_stall_steps" not in raw:
        return None  # folded before the watchdog's fields: its default would say "no stall"
    try:
        return msgspec.convert(raw, SUMMARY_TYPES[kind.name])
    except (msgspec.ValidationError, AttributeError):
        return None


# Summary fields a frame's records can only add to (or raise the peak of): the whole run's
# value is at least the last frame's. The rest are the last record's (or derived).
_AT_LEAST = ("steps", "finished_requests", "peak_gpu_kv_pct", "peak_cpu_kv_pct", "peak_swapped",
             "swap_outs", "swap_ins", "recompute_preemptions", "prefill_blocked_steps",
             "policy_changes", "prompt_tokens", "generated_tokens", "exec_seconds",
             "preemptions", "max_preemptions_per_request", "lost_tokens", "recomputed_tokens",
             "computed_tokens", "cached_tokens_per_admission", "prompt_tokens_computed",
             "peak_running",
             "peak_waiting",
             "admission_withheld_steps", "peak_cpu_tier_chunks", "cpu_tier_loads",
             "cpu_tier_load_bytes", "cpu_tier_stores", "cpu_tier_store_bytes",
             "cpu_tier_evictions", "cpu_tier_hit_tokens", "cpu_tier_wait_seconds",
             "underfilled_steps")


def last_frame_disagrees(indexed: IndexedFile) -> str | None:
    """What in the index's summary the records of the file's last data frame contradict (its
    end, its last clock, and every count at least the frame's own), or None. The frame is the
    one `vouch` has read and checked (kept in the file's cache)."""
    summary = indexed.index.summary
    if summary is None:
        return None
    k = len(indexed.index.frames) - 1
    first = indexed.index.frames[k][1]
    try:
        _, records = indexed.frame_records(k)
    except (IndexDamaged, OSError) as exc:
        return f"the index's last frame does not read ({exc})"
    summary = current_names(summary)
    builder = SummaryBuilder()
    builder.kind = kind_of(summary.get("engine"))
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
