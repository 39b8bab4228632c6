"""One step in full: every field of its StepRecord, with request ids spelled out (a V1 step in
V1's words: new, resumed and running requests, the preempted with what they lost).

It follows the step the screen shows unless a table row was chosen, which pins it there. A V1
step inside an admission stall (engine.analysis.stall) says so under its queues, from the step
the watchdog speaks, as the status does.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from engine.analysis.reasons import counts_text, reason_text
from engine.analysis.stall import Stall, stall_text
from engine.conventions import pct_text, request_ids
from engine.safe_text import safe
from engine.stream.records import EngineAborted, StepRecord, V1StepRecord
from engine.stream.timeaxis import SIM, TimeAxis
from tui.widgets.redraw import Redrawn
from tui.widgets.theme import Roles, component_roles, unstyled


def _ids(ids: list[str], limit: int = 40) -> str:
    """Request ids as names (`#30`, engine.conventions), never read as counts."""
    return safe(request_ids(ids, limit))  # ids come from a file


class StepDetail(Redrawn, Static):
    """The full record of one step."""

    DEFAULT_CSS = """
    StepDetail {
        height: 15;
        border: round $primary;
        border-title-color: $text;
        padding: 0 1;
    }
    StepDetail > .step-detail--out { color: $text-error; text-style: bold; }
    StepDetail > .step-detail--ignored { color: $text-warning; }
    StepDetail > .step-detail--held { color: $text-warning; text-style: bold; }
    StepDetail > .step-detail--repeat { background: $error; color: $foreground;
                                        text-style: bold; }
    """
    COMPONENT_CLASSES = {"step-detail--out", "step-detail--ignored", "step-detail--held",
                         "step-detail--repeat"}

    _drawn: tuple | None = None  # the key of what is on screen

    def on_mount(self) -> None:
        self.border_title = "step detail"
        self._drawn = None

    def show(self, step: StepRecord | None, *, pinned: bool = False,
             show_wall: bool = True, axis: TimeAxis = SIM, stall: Stall | None = None,
             abort: EngineAborted | None = None) -> None:
        """`abort`: `step` is the step vLLM raised in (engine.conventions), described as the
        state vLLM left, with no decisions."""
        self.shown = (step, pinned, show_wall, axis, stall, abort)  # drawn by Redrawn

    def draw(self, step: StepRecord | None, pinned: bool, show_wall: bool, axis: TimeAxis,
             stall: Stall | None, abort: EngineAborted | None) -> None:
        # the width is in the key: another one may need (or no longer need) hanging values
        key = (step.step if step is not None else -1, pinned, stall, abort is not None,
               self.content_size.width)
        if key == self._drawn:
            return
        self._drawn = key
        self.border_title = f"step {step.step:,}{' (pinned, esc unpins)' if pinned else ''}" \
            if step is not None else "step detail"
        # Fixed height: skip the layout pass Static.update does by default.
        roles = component_roles(self, "step-detail")
        if step is not None and abort is not None:
            text = self.describe_abort(step, abort, show_wall, axis, roles)
        elif step is not None:
            text = self.describe(step, show_wall, axis, roles, stall)
        self.update(self.fitted(text, step) if step is not None else "no steps yet",
                    layout=False)

    def fitted(self, text: Text, step: StepRecord) -> RenderableType:
        """The text as it is where every line fits the pane, else with hanging values."""
        width = self.content_size.width
        if not width or all(cell_len(line) <= width for line in text.plain.split("\n")):
            return text
        return hanging(text, V1_LABEL if type(step) is V1StepRecord else V0_LABEL)

    def forget(self) -> None:
        self._drawn = None

    @staticmethod
    def describe(s: StepRecord, show_wall: bool = True, axis: TimeAxis = SIM,
                 roles: Roles = unstyled, stall: Stall | None = None) -> Text:
        t = Text()
        _clock_line(t, s, show_wall, axis)
        if type(s) is V1StepRecord:
            _describe_v1(t, s, roles, stall)
            return t
        _describe_v0(t, s, roles)
        return t


    @staticmethod
    def describe_abort(s: StepRecord, abort: EngineAborted, show_wall: bool = True,
                       axis: TimeAxis = SIM, roles: Roles = unstyled) -> Text:
        """The step vLLM raised in: its queues and blocks as vLLM left them, what it raised,
        and no decisions (vLLM never returned them)."""
        t = Text()
        _clock_line(t, s, show_wall, axis)
        if type(s) is V1StepRecord:
            t.append(f"\nqueues    running {s.running}  waiting {s.waiting}")
            t.append(f"\nKV        GPU {s.gpu_used}/{s.gpu_total} ({pct_text(s.gpu_pct)}%)")
        else:
            t.append(f"\nqueues   running {s.running}  swapped {s.swapped}  waiting "
                     f"{s.waiting}")
            t.append(f"\nKV       GPU {s.gpu_used}/{s.gpu_total} ({pct_text(s.gpu_pct)}%)  "
                     f"CPU {s.cpu_used}/{s.cpu_total} ({pct_text(s.cpu_pct)}%)")
        t.append(f"\n✗ vLLM raised in this step: {safe(abort.error)}: {safe(abort.message)}",
                 roles("out"))
        t.append("\nits decisions were never returned: the numbers above are what it left")
        return t


V0_LABEL, V1_LABEL = 9, 10
"""Cells the labels take ("swap out ", "preempted "): a long value wraps under its value."""


def hanging(text: Text, indent: int) -> RenderableType:
    """Each `label value` line with its value in a column of its own, so that a long value
    wraps under the value ("evicted 0" had wrapped under the labels, at the pane's left); the
    clock line and sentences without a label as they are."""
    parts: list[RenderableType] = []
    grid: Table | None = None
    for line in text.split("\n"):
        plain = line.plain
        if len(plain) > indent and plain[indent - 1] == " " and plain[:1] != " " and parts:
            if grid is None:
                grid = Table.grid()
                grid.add_column(width=indent, no_wrap=True)
                grid.add_column(ratio=1, overflow="fold")
                parts.append(grid)
            grid.add_row(line[:indent], line[indent:])
        else:
            grid = None
            parts.append(line)
    return Group(*parts)


def _clock_line(t: Text, s: StepRecord, show_wall: bool, axis: TimeAxis) -> None:
    if axis is SIM:
        t.append(f"policy {safe(s.policy)}   sim {s.sim_s:,.3f} s (+{s.sim_step_s * 1000:.1f} ms)")
        if show_wall:
            t.append(f"   wall {s.wall_s:,.2f} s")
    else:  # measured: the wall clock is the axis; the cost model's guess is for comparison
        t.append(f"policy {safe(s.policy)}   {axis.short} {axis.clock(s):,.3f} s  exec "
                 f"{s.exec_s * 1000:.2f} ms (model {s.sim_step_s * 1000:.1f} ms)")


def _describe_v0(t: Text, s: StepRecord, roles: Roles) -> None:
    t.append(f"\nqueues   running {s.running} ({s.running_seqs} seqs)  swapped {s.swapped}"
             f"  waiting {s.waiting}")
    t.append(f"\nKV       GPU {s.gpu_used}/{s.gpu_total} ({pct_text(s.gpu_pct)}%)  "
             f"CPU {s.cpu_used}/{s.cpu_total} ({pct_text(s.cpu_pct)}%)")
    t.append(f"\ntokens   {s.batched_tokens}/{s.token_budget} batched  prompt "
             f"{s.prompt_tokens}  generated {s.generated_tokens}")
    chunks = " ".join(f"{safe(rid)}:{n}" for rid, n in s.prefills) or "—"
    t.append(f"\nprefill  {chunks}")
    t.append(f"\ndecode   {s.decode_groups} groups / {s.decode_seqs} seqs")
    t.append("\nswap out ")
    t.append(_ids(s.swapped_out), roles("out") if s.swapped_out else "")
    t.append(f"\nswap in  {_ids(s.swapped_in)}")
    t.append(f"\nrecomp   {_ids(s.recomputed)}")
    t.append(f"\nfinished {_ids(s.finished)}")
    t.append(f"\nfirst tk {_ids(s.first_tokens)}")
    if s.ignored:
        t.append(f"\nignored  {_ids(s.ignored)}", roles("ignored"))
    if s.withheld:
        t.append(f"\nthe policy withheld new prefills ({s.held_back} waiting held back)",
                 roles("held"))


def _chunks(pairs: list[tuple[str, int]], limit: int = 12) -> str:
    if not pairs:
        return "—"
    shown = " ".join(f"{safe(rid)}:{n}" for rid, n in pairs[:limit])
    return shown if len(pairs) <= limit else f"{shown} … (+{len(pairs) - limit})"


def _waits(s: V1StepRecord) -> str:
    """Why the waiting wait: what the head request waits for, and vLLM's own counts by
    reason (engine.analysis.reasons); "" when the record says neither."""
    reason, counts = reason_text(s), counts_text(s)
    if not reason and not counts:
        return ""
    head = f"head request waits for {reason}" if reason else ""
    return "  ".join(p for p in (head, f"vLLM: {counts}" if counts else "") if p)


def _describe_v1(t: Text, s: V1StepRecord, roles: Roles, stall: Stall | None = None) -> None:
    """V1's step: no swap space, no groups; preemption is recompute. Labels are 10 cells,
    so that `preempted` lines up with the rest (at 9 its ids stood one cell right)."""
    from tui.widgets.decisions_table import REPEAT_PREEMPTIONS
    from tui.widgets.status_bar import human_count

    t.append(f"\nqueues    running {s.running}  waiting {s.waiting}  finished {s.finished_total}"
             f" so far")
    t.append(f"\nKV        GPU {s.gpu_used}/{s.gpu_total} ({pct_text(s.gpu_pct)}%)  "
             f"{s.kv_tokens:,} tokens held")
    waits = _waits(s)
    if waits:
        t.append(f"\nwaits     {waits}")
    if stall is not None:
        t.append(f"\n{stall_text(stall, compact=False)} since step {stall.since:,}",
                 roles("held"))
    tier = cpu_tier_line(s)
    if tier:
        t.append(f"\nCPU tier  {tier}")
    t.append(f"\ntokens    {s.batched_tokens}/{s.token_budget} batched  prompt "
             f"{s.prompt_tokens}  generated {s.generated_tokens}")
    t.append(f"\nagain     {s.recomputed_tokens} recomputed  {s.prefix_hit_tokens} cached"
             + (f" (CPU tier hits {s.cpu_hit_tokens})" if tier else ""))
    t.append(f"\nnew       {_chunks(s.new)}")
    t.append(f"\nresumed   {_chunks(s.resumed)}")
    chunks = [(rid, n) for rid, n in s.scheduled if n > 1]
    t.append(f"\nrunning   {s.decode_reqs} decoding" + (f", chunks {_chunks(chunks)}"
                                                       if chunks else ""))
    t.append("\npreempted ")
    if not s.preempted:
        t.append("—")
    for i, (rid, lost, count) in enumerate(s.preempted[:12]):
        if i:
            t.append(", ")
        t.append(f"#{safe(rid)}", roles("out"))
        t.append(" (lost ")
        t.append(f"{lost:,} tok, ")
        t.append(f"×{count}", roles("repeat") if count >= REPEAT_PREEMPTIONS else "")
        t.append(")")
    if len(s.preempted) > 12:
        t.append(f" … (+{len(s.preempted) - 12})")
    t.append(f"\ndone      finished {_ids(s.finished, 12)} · first token "
             f"{_ids(s.first_tokens, 12)}")
    t.append(f"\nso far    {s.preemptions_total:,} preemptions · tax {s.recompute_tax:.2f} "
             f"({human_count(s.recomputed_total)} of {human_count(s.computed_total)} tokens)")
    if s.withheld:
        t.append(f"\nthe policy withheld an admission ({s.held_back} waiting)", roles("held"))


def cpu_tier_line(s: V1StepRecord) -> str:
    """The CPU offloading tier's numbers for one step ("" when the run has none): chunks
    resident, the step's loads and stores (jobs and bytes), evictions and hit tokens."""
    if not s.cpu_chunks_total:
        return ""
    from tui.widgets.status_bar import human_bytes

    def size(n: int) -> str:
        return human_bytes(n, compact=True).replace(" ", "")

    return (f"{s.cpu_chunks}/{s.cpu_chunks_total} ({pct_text(s.cpu_pct, 0)}%)  load {s.cpu_loads} "
            f"({size(s.cpu_load_bytes)})  store {s.cpu_stores} ({size(s.cpu_store_bytes)})  "
            f"evicted {s.cpu_evictions}")
