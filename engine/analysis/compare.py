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
import sys
from typing import Sequence

import msgspec

from engine.safe_text import safe
from engine.stream.run import Recording
from engine.stream.records import StepRecord
from engine.analysis.summary import summarize
from engine.stream.timeaxis import axis_named, axis_of
from engine.traces.stats import label as trace_label
from engine.conventions import pct_text
from engine.widths import terminal_width


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
    """Where each run's decisions first differ from the first run's, each run named by its
    letter (the table's key names the files), so that a line fits 80 columns."""
    lines = []
    for i, m in enumerate(metrics[1:], start=1):
        where = (f"first differ from A's at step {m.differs_from_first_at:,}"
                 if m.differs_from_first_at is not None else "never differ from A's")
        lines.append(f"{run_letter(i)}: decisions {where}")
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


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MAX_CELL = 14
"""A cell wider than this moves its whole row below the table (as `label  A value  B value`),
so one long value (a stall's reason, `per-iteration-count`) does not widen every block."""


def run_letter(i: int) -> str:
    """Run i's letter: its column in the table, its mark on the plot, its line in the key."""
    return LETTERS[i] if i < len(LETTERS) else f"R{i + 1}"


def _cell(value: object) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else safe(value)


def _rows(metrics: Sequence[RunMetrics]) -> list[tuple[str, list[str]]]:
    """(label, one cell per run) for every row the runs have, in order."""
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
    out = []
    for label, field in rows:
        cells = []
        for m in metrics:
            value = getattr(m, field, None)
            if field.endswith("_pct") and isinstance(value, float):
                value = pct_text(value)  # one decimal in every run's column (conventions)
            cells.append(_cell(axis_named(value).unit if field == "time_axis" else value))
        out.append((label.replace(_TIMED, axis), cells))
    return out


def format_table(metrics: Sequence[RunMetrics], width: int | None = 80) -> str:
    """Metrics as rows, runs as columns, fitted to `width` (None: one block, however wide).

    Runs are named by letter (A, B, ...) in a key above the table, so a column is as wide as
    its values, not its file name; the runs that fit side by side form a block, and the next
    ones a block below it, each with the row labels. A row with a value wider than MAX_CELL is
    printed under the blocks, one `A value` per run, so the table never wraps or cuts."""
    letters = [run_letter(i) for i in range(len(metrics))]
    lines = ["runs:"] + [f"  {letter}  {safe(m.name)}" for letter, m in zip(letters, metrics)]
    rows = _rows(metrics)
    wide = [(label, cells) for label, cells in rows
            if width is not None and any(len(c) > MAX_CELL for c in cells)]
    table = [(label, cells) for label, cells in rows if (label, cells) not in wide]
    label_width = max(len(label) for label, _ in table) if table else 0
    widths = [max([len(letter)] + [len(cells[i]) for _, cells in table])
              for i, letter in enumerate(letters)]
    blocks: list[list[int]] = [[]]
    used = label_width
    for i, w in enumerate(widths):
        if width is not None and blocks[-1] and used + 2 + w > width:
            blocks.append([])
            used = label_width
        blocks[-1].append(i)
        used += 2 + w
    for block in blocks:
        lines.append("")
        head = [" " * label_width, *(letters[i].rjust(widths[i]) for i in block)]
        lines.append("  ".join(head).rstrip())
        lines.append("  ".join(["-" * label_width, *("-" * widths[i] for i in block)]))
        for label, cells in table:
            lines.append("  ".join([label.ljust(label_width),
                                    *(cells[i].rjust(widths[i]) for i in block)]).rstrip())
    for label, cells in wide:
        lines += ["", f"{label}:"]
        lines += [f"  {letter}  {cell}" for letter, cell in zip(letters, cells)]
    return "\n".join(lines)


def _nice_ticks(lo: float, hi: float, most: int = 6) -> list[int]:
    """Whole-number ticks from `lo` to `hi`, at most `most`, a round step apart (1, 2 or 5
    times a power of ten): a step axis never says "step 399.8"."""
    span = max(1.0, hi - lo)
    power = 1
    while True:
        for base in (1, 2, 5):
            step = base * power
            if span / step <= most - 1:
                first = -(-int(lo) // step) * step
                return list(range(first, int(hi) + 1, step))
        power *= 10


def cpu_kv_plot(recordings: Sequence[Recording], names: Sequence[str],
                width: int | None = None, height: int = 20, color: bool | None = None,
                column: str = "cpu_pct") -> str:
    """One plotext chart of CPU KV % (V1, which has no CPU swap: GPU KV %) over steps, one
    line per run, each drawn with its letter (run_letter) as its mark, and the legend under
    the plot (plotext's own sits inside it and covered the lines): the mark a line is drawn
    with is the mark the legend shows. The x axis has whole-step ticks."""
    import plotext as plt

    if width is None:
        width = min(terminal_width(), 160)
    if color is None:
        color = sys.stdout.isatty()
    plt.clear_figure()
    plt.plot_size(width, height)
    last = 0
    for i, recording in enumerate(recordings):
        if recording.steps:
            xs = [float(s.step) for s in recording.steps]
            last = max(last, recording.steps[-1].step)
            plt.plot(xs, recording.column(column), marker=run_letter(i)[0])
    what = "GPU" if column == "gpu_pct" else "CPU"
    plt.title(f"{what} KV-cache usage (%) by step")
    plt.xlabel("step")
    plt.ylim(0, 100)
    plt.yticks([0, 25, 50, 75, 100])
    ticks = _nice_ticks(0, last)
    if ticks[-1] < last:  # end the axis at a round step
        ticks.append(ticks[-1] + (ticks[1] - ticks[0] if len(ticks) > 1 else 1))
    plt.xlim(0, ticks[-1])
    plt.xticks(ticks, [f"{t:,}" for t in ticks])
    if not color:
        plt.theme("clear")
    text = plt.build()
    plt.clear_figure()
    text = text if color else plt.uncolorize(text)
    legend = [f"{run_letter(i)[0]} {safe(name)}" for i, name in enumerate(short_names(names))]
    return text.rstrip("\n") + "\n" + _columns(legend, width)


def short_names(names: Sequence[str]) -> list[str]:
    """The runs' file names without what they all share (a `seed-5578-` prefix, the
    `.jsonl.zst` suffix): what tells them apart, for a legend where the key is above."""
    stems = [name.removesuffix(".zst").removesuffix(".jsonl") for name in names]
    if len(stems) < 2:
        return stems
    prefix = os.path.commonprefix(stems)
    prefix = prefix[:max(prefix.rfind("-"), prefix.rfind("_")) + 1]  # at a word's end
    return [stem[len(prefix):] or stem for stem in stems]


def _columns(items: Sequence[str], width: int) -> str:
    """`items` in as many columns as fit in `width`, down then across."""
    if not items:
        return ""
    cell = max(len(item) for item in items) + 2
    per_line = max(1, (width + 2) // cell)
    rows = -(-len(items) // per_line)
    lines = []
    for r in range(rows):
        row = [items[c * rows + r] for c in range(per_line) if c * rows + r < len(items)]
        lines.append("".join(item.ljust(cell) for item in row).rstrip())
    return "\n".join(lines)


def compare_text(metrics: Sequence[RunMetrics], recordings: Sequence[Recording],
                 plot: bool = True, width: int | None = None, wide: bool = False) -> str:
    """The table and the plot, fitted to `width` (default: the terminal's, 80 when it has
    none); `wide`: the table in one block however wide."""
    fit = terminal_width() if width is None else width
    text = format_table(metrics, None if wide else fit)
    lines = divergence_lines(metrics)
    if lines:
        text += "\n\n" + "\n".join(lines)
    if plot:
        v1 = any(isinstance(m, V1RunMetrics) for m in metrics)
        text += "\n\n" + cpu_kv_plot(recordings, [m.name for m in metrics],
                                      width=min(fit, 160),
                                      column="gpu_pct" if v1 else "cpu_pct")
    return text
