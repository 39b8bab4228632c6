"""`observatory compare`: a few numbers per run, side by side, and one plot of CPU KV usage.

The metrics are the ones issue #5578 is about (how full the swap space got, whether and when
vLLM aborted, what the fix costs in throughput and latency). Throughput and TTFT are on each
recording's time axis (engine.stream.timeaxis): *simulated* time for sim runs, so that runs made on
different machines, or under a loaded TUI, compare fairly; *measured* time for gpu runs, whose
arrivals were paced by the wall clock. The labels say which; runs on different axes are shown
side by side but their times are not comparable, and the "time axis" row says so.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from typing import Sequence

import msgspec

from engine.safe_text import safe
from engine.stream.run import Recording
from engine.stream.records import StepRecord
from engine.analysis.summary import summarize
from engine.stream.timeaxis import axis_named, axis_of
from engine.traces.stats import label as trace_label


class RunMetrics(msgspec.Struct, kw_only=True):
    name: str  # the recording's file name
    policy: str  # the policy the run started with, plus any it switched to ("off>strict")
    steps: int
    end: str | None  # RunFinished.reason, None if the recording was cut
    peak_cpu_kv_pct: float
    peak_swapped: int
    abort_step: int | None
    throughput_tok_s: float | None  # generated tokens per second on the time axis
    ttft_mean_s: float | None  # seconds (time axis) from arrival to the first token
    ttft_p99_s: float | None
    withheld_steps: int  # steps in which the policy withheld new prefills
    time_axis: str = "sim"  # "sim" or "gpu" (engine.stream.timeaxis)
    trace: str | None = None  # the replayed trace (engine.traces.stats.label); None: a preset
    # the first step whose decisions differ from the first run's (engine.analysis.divergence;
    # None: the first run itself, or runs that never differ)
    differs_from_first_at: int | None = None


class V1RunMetrics(RunMetrics, kw_only=True):
    """A V1 run's metrics: V1 has no swap space; its thrash is recompute."""

    preemptions: int
    max_preemptions_per_request: int
    recompute_tax: float
    peak_gpu_kv_pct: float
    computed_tokens: int = 0
    cpu_tier_hit_tokens: int = 0  # tokens served from vLLM's CPU KV tier (0: no tier)
    longest_stall_steps: int = 0  # the longest admission stall (engine.analysis.stall); 0: none
    longest_stall_since: int | None = None  # the step it began
    longest_stall_reason: str | None = None  # what the head request waited for, as recorded
    underfilled_steps: int = 0  # seats counted full, fewer scheduled (engine.analysis.seats)
    unfinished_requests: int = 0  # arrived and never finished


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: a value that actually occurred, no interpolation."""
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


def run_metrics(recording: Recording) -> RunMetrics:
    """The summary's peaks and counts (one definition: engine.analysis.summary), plus TTFT and
    throughput on the recording's time axis, which only a comparison needs."""
    summary = summarize(recording.all_items())
    axis = axis_of(recording.header)
    steps: list[StepRecord] = recording.steps
    arrival_s: dict[str, float] = {}
    for arrivals in recording.arrivals:
        arrival_s.update(zip(arrivals.request_ids, arrivals.arrival_s))
    ttfts = sorted(axis.clock(s) - arrival_s[rid] for s in steps for rid in s.first_tokens
                   if rid in arrival_s)
    sim_s = axis.clock(steps[-1]) if steps else 0.0
    policies = [str(recording.header.spec.get("policy", steps[0].policy if steps else "?"))]
    policies += [change.new for change in recording.policy_changes]
    v1 = {}
    if summary.__class__.__name__ == "V1Summary":
        v1 = dict(preemptions=summary.preemptions,
                  max_preemptions_per_request=summary.max_preemptions_per_request,
                  recompute_tax=summary.recompute_tax, peak_gpu_kv_pct=summary.peak_gpu_kv_pct,
                  computed_tokens=summary.computed_tokens,
                  cpu_tier_hit_tokens=summary.cpu_tier_hit_tokens,
                  longest_stall_steps=summary.longest_stall_steps,
                  longest_stall_since=summary.longest_stall_since,
                  longest_stall_reason=summary.longest_stall_reason,
                  underfilled_steps=summary.underfilled_steps,
                  unfinished_requests=summary.unfinished_requests)
    return (V1RunMetrics if v1 else RunMetrics)(
        **v1,
        name=os.path.basename(recording.path),
        policy=">".join(policies),
        steps=summary.steps,
        end=summary.end_reason,
        peak_cpu_kv_pct=summary.peak_cpu_kv_pct,
        peak_swapped=summary.peak_swapped,
        abort_step=summary.abort_step,
        throughput_tok_s=round(summary.generated_tokens / sim_s, 1) if sim_s > 0 else None,
        ttft_mean_s=round(sum(ttfts) / len(ttfts), 4) if ttfts else None,
        ttft_p99_s=round(_percentile(ttfts, 99), 4) if ttfts else None,
        withheld_steps=summary.prefill_blocked_steps,
        time_axis=axis.name,
        trace=trace_label(recording.header.spec),
    )


def mark_divergence(metrics: Sequence[RunMetrics], recordings: Sequence[Recording]) -> None:
    """Each run's first step whose decisions differ from the first run's (a fork and its
    original, two policies on one workload)."""
    from engine.analysis.divergence import first_difference

    for m, recording in zip(metrics[1:], recordings[1:]):
        m.differs_from_first_at = first_difference(recordings[0].steps, recording.steps)


def divergence_lines(metrics: Sequence[RunMetrics]) -> list[str]:
    first = metrics[0].name if metrics else ""
    lines = []
    for m in metrics[1:]:
        where = (f"first differ from {safe(first)}'s at step {m.differs_from_first_at:,}"
                 if m.differs_from_first_at is not None else f"never differ from {safe(first)}'s")
        lines.append(f"{safe(m.name)}: decisions {where}")
    return lines


def compare_json(metrics: Sequence[RunMetrics]) -> str:
    return msgspec.json.format(msgspec.json.encode(list(metrics)), indent=2).decode()


_TIMED = "{axis}"  # replaced by the runs' time axis in a row label
_ROWS: tuple[tuple[str, str], ...] = (
    ("policy", "policy"),
    ("steps", "steps"),
    ("end", "end"),
    ("time axis", "time_axis"),
    ("peak CPU KV %", "peak_cpu_kv_pct"),
    ("peak swapped", "peak_swapped"),
    ("abort step", "abort_step"),
    ("gen tok/s ({axis})", "throughput_tok_s"),
    ("TTFT mean s ({axis})", "ttft_mean_s"),
    ("TTFT p99 s ({axis})", "ttft_p99_s"),
    ("prefill-withheld steps", "withheld_steps"),
)


_V1_ROWS: tuple[tuple[str, str], ...] = (
    ("peak GPU KV %", "peak_gpu_kv_pct"),
    ("preemptions", "preemptions"),
    ("most of one request", "max_preemptions_per_request"),
    ("recompute tax", "recompute_tax"),
    ("computed tokens", "computed_tokens"),
    ("tokens from CPU tier", "cpu_tier_hit_tokens"),
    ("longest stall (steps)", "longest_stall_steps"),
    ("stalled since step", "longest_stall_since"),
    ("stall waits for", "longest_stall_reason"),
    ("under-filled steps", "underfilled_steps"),
    ("unfinished requests", "unfinished_requests"),
)


def _axis_label(metrics: Sequence[RunMetrics]) -> str:
    """"sim" or "GPU" when every run shares the axis; otherwise say the times don't mix."""
    names = {m.time_axis for m in metrics}
    if len(names) == 1:
        return axis_named(names.pop()).short
    return "per run: not comparable"


def format_table(metrics: Sequence[RunMetrics]) -> str:
    """Metrics as rows, runs as columns: reads across, whatever the number of runs."""
    cells = [["", *(safe(m.name) for m in metrics)]]
    axis = _axis_label(metrics)
    rows = _ROWS
    if all(isinstance(m, V1RunMetrics) for m in metrics):  # V1 has no swap space; its CPU
        # KV is the offloading connector's tier, when a run has one
        tier = any(m.peak_cpu_kv_pct or m.cpu_tier_hit_tokens for m in metrics)
        gone = ("peak_swapped",) if tier else ("peak_cpu_kv_pct", "peak_swapped")
        rows = tuple(r for r in _ROWS if r[1] not in gone)
    if any(isinstance(m, V1RunMetrics) for m in metrics):
        rows += _V1_ROWS
    if any(m.trace for m in metrics):
        rows = (("trace", "trace"),) + rows
    for label, field in rows:
        row = [label.replace(_TIMED, axis)]
        for m in metrics:
            value = getattr(m, field, None)
            if field == "time_axis":
                value = axis_named(value).unit
            row.append("-" if value is None else f"{value:,}" if isinstance(value, int) else
                       safe(value))
        cells.append(row)
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = []
    for n, row in enumerate(cells):
        first = row[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(row[1:], widths[1:])]
        lines.append("  ".join([first, *rest]).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def cpu_kv_plot(recordings: Sequence[Recording], names: Sequence[str],
                width: int | None = None, height: int = 20, color: bool | None = None,
                column: str = "cpu_pct") -> str:
    """One plotext chart of CPU KV % (V1, which has no CPU swap: GPU KV %) over steps, one
    line per run."""
    import plotext as plt

    if width is None:
        width = min(shutil.get_terminal_size((100, 24)).columns, 160)
    if color is None:
        color = sys.stdout.isatty()
    plt.clear_figure()
    plt.plot_size(width, height)
    markers = ("braille", "x", "+", "o", "*", "#")  # without colour, lines differ by marker
    for i, (recording, name) in enumerate(zip(recordings, names)):
        if recording.steps:
            xs = [float(s.step) for s in recording.steps]
            marker = None if color else markers[i % len(markers)]
            plt.plot(xs, recording.column(column), label=safe(name), marker=marker)
    plt.title(f"{'GPU' if column == 'gpu_pct' else 'CPU'} KV-cache usage (%) by step")
    plt.xlabel("step")
    plt.ylim(0, 100)
    if not color:
        plt.theme("clear")
    text = plt.build()
    plt.clear_figure()
    return text if color else plt.uncolorize(text)


def compare_text(metrics: Sequence[RunMetrics], recordings: Sequence[Recording],
                 plot: bool = True) -> str:
    text = format_table(metrics)
    lines = divergence_lines(metrics)
    if lines:
        text += "\n\n" + "\n".join(lines)
    if plot:
        v1 = any(isinstance(m, V1RunMetrics) for m in metrics)
        text += "\n\n" + cpu_kv_plot(recordings, [m.name for m in metrics],
                                      column="gpu_pct" if v1 else "cpu_pct")
    return text
