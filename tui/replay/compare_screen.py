"""A/B replay: two recordings under one cursor (`observatory replay A B`).

Space, the arrows, n/N and g move both runs at once. Each run keeps its own status lines (the key
numbers, the runway), its abort banner and its decisions table, ending at the step it is at; the
plots draw both runs on shared axes with one cursor line. The first step where the runs'
decisions differ is marked in both tables (◆) and `d` jumps there. `t` aligns the runs on
simulated time instead of on step number (see tui.replay.ab_timeline). A run that ended first (it
aborted) stays at its end, banner and all, while the other goes on.

It is built from the same widgets as the replay screen (StatusBar, AbortBanner, RunPlot,
DecisionsTable, ReplayBar), composed twice. A run may still be growing (a fork of the other,
opened by `f` in replay: tui.replay.fork_action): its source keeps appending to it, and the
first difference is worked out again as it grows; `escape` goes back to the replay.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Static

from engine.analysis.divergence import decision_diff, first_difference
from engine.analysis.runway import late_fix
from engine.kinds import V0, common_kind
from engine.stream.records import StepRecord, V1StepRecord
from engine.stream.timeaxis import axis_of
from tui.playhead import Playhead
from tui.playhead_keys import (FASTER, GOTO, HELP, NEXT_EVENT, PLAY, PREV_EVENT, QUIT, SEEK_END,
                               SEEK_START, SLOWER, STEP_BACK, STEP_BACK_100, STEP_ON, STEP_ON_100,
                               PlayheadKeys)
from tui.replay.ab_timeline import Align, Timeline, TimelinePace
from tui.widgets import theme
from tui.widgets.abort_banner import AbortBanner
from tui.widgets.decisions_table import DecisionsTable
from tui.widgets.key_footer import KeyFooter
from tui.messages import RecordsArrived, SeekRequested, StepSelected, StreamEnded
from tui.run_source import RunSource
from tui.widgets.replay_bar import ReplayBar
from tui.widgets.run_panel import runway_at
from tui.widgets.run_plot import Line, Marker, RunPlot
from tui.run_view import RunView
from tui.widgets.status_bar import Status, StatusBar
from tui.widgets.theme import component_roles

LETTERS = "AB"
TICK_HZ = 12
STEPS_PER_S = 60.0  # play pace at 1x when aligned on steps (the seed's pace on a laptop)
SMALL_HEIGHT = 32
PLOTS = (("compare-cpu", "CPU KV %", "CPU%", "cpu_pct", (0.0, 100.0)),
         ("compare-swapped", "swapped groups", "swapped", "swapped", None),
         ("compare-running", "running groups", "running", "running", None))
V1_PLOTS = (("compare-cpu", "GPU KV %", "GPU%", "gpu_pct", (0.0, 100.0)),
            ("compare-swapped", "preemptions so far", "preempted", "preemptions_total", None),
            ("compare-running", "running requests", "running", "running", None))
"""Two V1 runs (no swap space, no groups): the GPU KV, the thrash (preemptions so far) and
the requests running, on the same three panes."""
PLOTS_OF = {"v0": PLOTS, "v1": V1_PLOTS}  # V0's unless every run compared is V1's


def decisions_summary(s: StepRecord) -> str:
    """One step's decisions in a few words, for comparing two different steps."""
    if type(s) is V1StepRecord:
        parts = [f"{len(s.new)} new", f"{len(s.resumed)} resumed", f"{s.decode_reqs} decode"]
        if s.preempted:
            parts.append(f"{len(s.preempted)} preempted")
        if s.withheld:
            parts.append("held")
        return " · ".join(parts)
    parts = [f"{len(s.prefills)} prefill", f"{s.decode_groups} decode"]
    if s.swapped_out:
        parts.append(f"{len(s.swapped_out)} out")
    if s.swapped_in:
        parts.append(f"{len(s.swapped_in)} in")
    if s.withheld:
        parts.append("held")
    return " · ".join(parts)


class CompareScreen(PlayheadKeys, Screen):
    """Two runs under one playhead (tui.playhead_keys): its positions are indices into the
    runs' shared timeline."""

    BINDINGS = [  # in priority order: a narrow footer shows the first ones that fit
        PLAY,
        Binding("d", "first_difference", "1st difference"),
        Binding("t", "align", "align step/time"),
        NEXT_EVENT, PREV_EVENT, STEP_BACK, STEP_ON, SLOWER, FASTER, STEP_BACK_100, STEP_ON_100,
        SEEK_START, SEEK_END, GOTO, HELP,
        Binding("escape", "back", "back"),
        QUIT,
    ]
    HELP_TITLE = "A/B replay keys"
    HELP_FOOTER = ("Both runs move together. ◆ marks the first step where their decisions "
                   "differ. Aligned on time, each run shows the last step it had finished by "
                   "that moment of simulated time; g takes run A's step number.")
    DEFAULT_CSS = """
    CompareScreen AbortBanner {
        height: auto;
    }
    CompareScreen.-small AbortBanner {
        max-height: 1;
    }
    CompareScreen #compare-plots {
        height: 40%;
        min-height: 7;
    }
    CompareScreen #ab-diff {
        height: 2;
        padding: 0 1;
        background: $boost;
        text-wrap: nowrap;  /* two lines, each cut at the edge: a wrap pushed line 2 out */
        text-overflow: ellipsis;
    }
    CompareScreen > .compare--difference { color: $accent; text-style: bold; }
    CompareScreen > .compare--differ { color: $accent; }
    CompareScreen > .compare--same { color: $success; }
    CompareScreen > .compare--aborted { color: $text-error; text-style: bold; }
    CompareScreen #ab-tables {
        height: 1fr;
        min-height: 4;
    }
    """

    COMPONENT_CLASSES = {"compare--difference", "compare--differ", "compare--same",
                         "compare--aborted"}

    def __init__(self, views: list[RunView], names: list[str],
                 sources: list[RunSource | None] | None = None, *, back: bool = False,
                 at: int | None = None) -> None:
        """`sources`: a run still being written (a fork: tui.replay.fork_action) keeps
        growing from its source; `back`: pushed over another screen, `escape` returns to it;
        `at`: the step to open on (else the first difference)."""
        super().__init__()
        self.views = views
        self.names = names
        self.sources = sources or [None] * len(views)
        self.back = back
        self.plots = PLOTS_OF[(common_kind(v.engine for v in views) or V0).name]
        self.timeline = Timeline(views, "step")
        self.playhead = Playhead(TimelinePace(self.timeline, STEPS_PER_S), 0,
                                 len(self.timeline) - 1)
        self._plotted: tuple | None = None
        self._measure()
        start = at if at is not None else self.difference
        if start is not None:  # open where the story starts
            self.playhead.seek(self.timeline.index_of_step(0, start))

    def _measure(self) -> None:
        """What is worked out from the runs as they stand: each one's late fix, and where
        their decisions first differ."""
        views = self.views
        self.late = [late_fix(v.steps, v.policy_changes, v.abort.step)
                     if v.abort is not None else None for v in views]
        self.difference = first_difference(views[0].steps, views[1].steps) \
            if len(views) == 2 else None

    # -- lifecycle ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        for i, _ in enumerate(self.views):
            yield StatusBar(id=f"status-{i}")
            yield AbortBanner(id=f"banner-{i}")
        with Horizontal(id="compare-plots"):
            for plot_id, title, short, _, ylim in self.plots:
                yield RunPlot(title, short_title=short, ylim=ylim, integer=ylim is None,
                              id=plot_id)
        yield Static(id="ab-diff")
        with Horizontal(id="ab-tables"):
            for i, _ in enumerate(self.views):
                yield DecisionsTable(id=f"decisions-{i}")
        yield ReplayBar(id="replay-bar")
        yield KeyFooter()

    def on_mount(self) -> None:
        for i, name in enumerate(self.names):
            table = self.query_one(f"#decisions-{i}", DecisionsTable)
            table.border_title = f"{LETTERS[i]}: {name}"
            table.marked = self.difference
            self.query_one(f"#banner-{i}", AbortBanner).compact = True
        self.set_interval(1 / TICK_HZ, self._tick)
        self.redraw(force_plots=True)
        self.post_message(RecordsArrived())  # a source handed over may hold records already

    def on_unmount(self) -> None:
        for source in self.sources:
            if source is not None:
                source.close()

    # -- a run that is still growing (a fork being run) ------------------------------------------

    def on_records_arrived(self, _: RecordsArrived) -> None:
        grew = False
        for view, source in zip(self.views, self.sources):
            if source is None:
                continue
            items = source.drain()
            for item in items:
                view.add(item)
            grew = grew or bool(items)
        if not grew:
            return
        steps = self.steps()[0]
        self._measure()
        self.timeline = Timeline(self.views, self.timeline.align)
        following = self.playhead.following
        self.playhead.extend(0, len(self.timeline) - 1)
        self.playhead.retime(TimelinePace(self.timeline, STEPS_PER_S),
                             self.timeline.index_of_step(0, steps))
        if following:
            self.playhead.follow()
        for i in range(len(self.views)):
            self.query_one(f"#decisions-{i}", DecisionsTable).marked = self.difference
        self.redraw(force_plots=True)

    def on_stream_ended(self, message: StreamEnded) -> None:
        self.on_records_arrived(RecordsArrived())
        if message.error:
            self.notify(message.error, title="the fork's recording", severity="error",
                        timeout=10)

    def notify_style_update(self) -> None:
        """A new theme: the difference line was styled in the old one's colours."""
        super().notify_style_update()
        if self.is_mounted:
            self.call_later(self.redraw, False)

    def on_resize(self) -> None:
        # two banners of two lines each leave no room for the tables below 32 rows: keep
        # their first line (the abort and its step)
        self.set_class(self.size.height < SMALL_HEIGHT, "-small")
        self.redraw(force_plots=True)

    # -- the cursor: the playhead's position is an index into the timeline -------------------

    @property
    def index(self) -> int:
        return self.playhead.position

    def steps(self) -> list[int]:
        """The step each run is at."""
        return [self.timeline.step_at(i, self.index) for i in range(len(self.views))]

    def moved(self) -> None:
        for i in range(len(self.views)):
            self.query_one(f"#decisions-{i}", DecisionsTable).follow()
        self.redraw(force_plots=False)

    def go(self, index: int) -> None:
        self.playhead.go(index)
        self.moved()

    def _tick(self) -> None:
        if self.playhead.tick(time.monotonic()):
            self.moved()

    # -- drawing --------------------------------------------------------------------------

    def status(self, i: int) -> Status:
        view = self.views[i]
        state = "replay"
        if view.abort_visible:
            state = "aborted"
        elif view.steps and view.cursor is not None and view.cursor >= view.last_step \
                and view.finished is not None:
            state = view.finished.reason
        return Status(state=state, steps_per_s=None, show_wall=False,
                      source=f"{LETTERS[i]} ━ {self.names[i]}", source_role=f"run-{i % 2}")

    def redraw(self, force_plots: bool = True) -> None:
        steps = self.steps()
        for i, (view, step) in enumerate(zip(self.views, steps)):
            if view.steps:
                view.cursor = step
            self.query_one(f"#status-{i}", StatusBar).show(view, self.status(i),
                                                           runway_at(view))
            self.query_one(f"#banner-{i}", AbortBanner).show(view.abort, view.abort_visible,
                                                             late=self.late[i],
                                                             engine=view.engine)
            self.query_one(f"#decisions-{i}", DecisionsTable).show_until(view, step)
        self.query_one("#ab-diff", Static).update(self.diff_text(steps))
        timeline = self.timeline
        x = timeline.positions[self.index]
        lo, hi = timeline.span
        last = int(hi) if timeline.align == "step" else len(timeline) - 1
        here = int(x) if timeline.align == "step" else self.index
        first = int(lo) if timeline.align == "step" else 0
        position = None if timeline.align == "step" else \
            f"sim {x / 1000:,.2f} s / {hi / 1000:,.2f} s"
        self.query_one(ReplayBar).show(here, first, last, self.playhead,
                                       note=f"  aligned on {timeline.align}",
                                       position=position)
        key = (timeline.align, self.size)
        for plot_id, _, _, series, _ in self.plots:
            plot = self.query_one(f"#{plot_id}", RunPlot)
            if force_plots or key != self._plotted:
                plot.x_label = timeline.label
                plot.show(self._lines(plot, series), self._markers(), (lo, hi), x)
            else:
                plot.show(plot._lines, plot._markers, plot._xlim, x)
        self._plotted = key

    def _lines(self, plot: RunPlot, series: str) -> list[Line]:
        lines = []
        for i, view in enumerate(self.views):
            xs, ys = view.series(series, view.first_step, view.last_step, plot.points)
            lines.append(Line(LETTERS[i], self.timeline.xs(i, xs), ys,
                              theme.RUN_COLORS[i % len(theme.RUN_COLORS)]))
        return lines

    def _markers(self) -> list[Marker]:
        marks = []
        for i, view in enumerate(self.views):
            marks += [Marker(self.timeline.x_of(i, p.step), theme.POLICY_MARKER, "policy")
                      for p in view.policy_changes]
            if view.abort is not None and view.steps:
                marks.append(Marker(self.timeline.x_of(i, view.clamp(view.abort.step)),
                                    theme.ABORT_MARKER, "abort"))
        return marks

    def diff_text(self, steps: list[int]) -> Text:
        """Line 1: the first difference. Line 2: how the runs' decisions compare here."""
        role = component_roles(self, "compare")
        text = Text(no_wrap=True, overflow="ellipsis")
        if len(self.views) != 2:
            return text
        a, b = self.views
        d = self.difference
        if d is None:
            text.append("the runs make the same decisions at every step", "bold")
        else:
            text.append(f"◆ first difference at step {d:,}", role("difference"))
            text.append(" (d jumps there)", "dim")  # before the fields, which may be cut
            ra, rb = a.step(d), b.step(d)
            if ra is not None and rb is not None:
                text.append(f": {', '.join(decision_diff(ra, rb))}")
            else:
                ended = "A" if ra is None else "B"
                text.append(f": run {ended} had ended")
        text.append("\n")
        sa, sb = a.step(steps[0]), b.step(steps[1])
        if self.timeline.align == "time" and sa is not None and sb is not None:
            xa, xb = axis_of(a.header), axis_of(b.header)
            text.append(f"A step {sa.step:,} ({xa.short} {xa.clock(sa):.2f} s) · B step "
                        f"{sb.step:,} ({xb.short} {xb.clock(sb):.2f} s): ")
        else:
            text.append(f"step {steps[0]:,}: " if steps[0] == steps[1]
                        else f"A step {steps[0]:,} · B step {steps[1]:,}: ")
        for letter, view, step in (("A", a, steps[0]), ("B", b, steps[1])):
            if view.steps and step >= view.last_step and (view.abort or view.finished):
                text.append(f"{letter} has ended ({'aborted' if view.abort else 'finished'})  ",
                            role("aborted") if view.abort else "bold")
        if sa is not None and sb is not None and sa.step == sb.step:
            fields = decision_diff(sa, sb)
            if fields:
                text.append("decisions differ in " + ", ".join(fields), role("differ"))
            else:
                text.append("same decisions", role("same"))
        else:  # different steps: say what each one decided
            for letter, record in (("A", sa), ("B", sb)):
                if record is not None:
                    text.append(f"{letter}: {decisions_summary(record)}  ")
        return text

    # -- the playhead's keys (tui.playhead_keys): positions are timeline indices ---------------

    def repaint(self) -> None:
        self.redraw(force_plots=False)

    def goto_range(self) -> tuple[int, int]:
        """Step numbers, of both runs (`g` takes run A's)."""
        if not self.views[0].steps:
            return 0, 0
        return min(v.first_step for v in self.views), max(v.last_step for v in self.views)

    def position_of_step(self, step: int) -> int:
        return self.timeline.index_of_step(0, step)

    def find_event(self, index: int, direction: int) -> tuple[int, str] | None:
        """The nearest policy change, swap-out burst or abort of either run, that way."""
        timeline = self.timeline
        here = timeline.positions[index]
        found: list[tuple[float, int, str]] = []
        for i, view in enumerate(self.views):
            step = timeline.step_at(i, index)
            event = view.next_event(step) if direction > 0 else view.prev_event(step)
            while event is not None:
                target = view.clamp(event.step)  # the abort: its step, shown
                x = timeline.x_of(i, target)
                if (x > here) if direction > 0 else (x < here):
                    found.append((x, i, event.text))
                    break
                event = view.next_event(event.step) if direction > 0 \
                    else view.prev_event(event.step)
        if not found:
            return None
        x, i, text = min(found, key=lambda f: f[0]) if direction > 0 \
            else max(found, key=lambda f: f[0])
        return timeline.index_of(x), f"{LETTERS[i]}: {text}"

    def action_first_difference(self) -> None:
        if self.difference is None:
            self.notify("the runs never differ", timeout=2)
            return
        self.go(self.timeline.index_of_step(0, self.difference))

    def action_align(self) -> None:
        """Switch between aligning on step numbers and on simulated time, keeping run A's
        step under the cursor."""
        step = self.steps()[0]
        align: Align = "time" if self.timeline.align == "step" else "step"
        self.timeline = Timeline(self.views, align)
        self.playhead.extend(0, len(self.timeline) - 1)
        self.playhead.retime(TimelinePace(self.timeline, STEPS_PER_S),
                             self.timeline.index_of_step(0, step))
        self.notify(f"aligned on {'simulated time' if align == 'time' else 'step number'}",
                    timeout=2)
        self.redraw(force_plots=True)

    def action_back(self) -> None:
        """Back to the screen this was opened from (a replay that forked); the fork goes on
        being written (its own process)."""
        if self.back:
            self.app.pop_screen()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.back if action == "back" else True

    # -- messages from the widgets ------------------------------------------------------------

    def on_seek_requested(self, message: SeekRequested) -> None:
        self.go(self.timeline.index_of(message.step))

    def on_step_selected(self, message: StepSelected) -> None:
        # the row was chosen by a click or Enter, both of which focus the table it is in
        run = 1 if self.focused is not None and self.focused.id == "decisions-1" else 0
        self.go(self.timeline.index_of_step(run, message.step))
