"""The monitor itself: status, abort banner, three plots, decisions table, step detail and event
log, all rendered from one RunView.

Both the live and the replay screen compose exactly this widget and call the same two methods;
they differ only in what drives the view (an engine session or a cursor over a recording) and in
the range they ask the plots to show. That is how replay reuses the live widgets.

Layout by priority (as btop and k9s do): the status and the plots (with their legends) always
stay; as the panel gets smaller the event log goes first, then the step detail, then the
table's least important columns (the table decides those itself). At 200 columns and more the
table widens its id columns instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.geometry import Size

from engine.analysis.runway import LateFix, Runway, forecast, late_fix, latest_change
from engine.analysis.stall import Stall, admission_stall, seat_limit
from engine.stream.records import StepRecord
from engine.stream.timeaxis import axis_of
from tui.widgets import theme
from tui.widgets.abort_banner import AbortBanner
from tui.widgets.decisions_table import DecisionsTable
from tui.widgets.event_log import EventLog
from tui.messages import StepSelected
from tui.widgets.run_plot import Line, Marker, RunPlot
from tui.run_view import RunView
from tui.widgets.status_bar import Status, StatusBar
from tui.widgets.step_detail import StepDetail

Mode = Literal["live", "replay"]

EVENTS_MIN_WIDTH = 140  # below this the event log collapses (the first pane to go)
DETAIL_MIN_WIDTH = 104  # below this the step detail collapses too
EVENTS_MIN_HEIGHT = 36  # the side column holds the detail (15 rows) and >= 6 rows of events
DETAIL_MIN_HEIGHT = 20
COMPACT_HEIGHT = 30  # below this the abort banner keeps to two lines


@dataclass(frozen=True)
class Series:
    """One line on a plot: the run index's series `name`, drawn in a theme variable."""

    name: str  # RunView.series name
    label: str
    color: theme.Variable
    short: str = ""  # label on narrow plots
    axis: str = "left"
    real: bool = False  # also drawn from an overlaid real log (--reference), as dots


Plot = tuple[str, str, str, tuple[float, float] | None, bool, tuple[Series, ...]]

PLOTS: tuple[Plot, ...] = (
    ("plot-kv", "KV cache %", "KV%", (0.0, 100.0), False, (
        Series("gpu_pct", "GPU", theme.GPU_KV, real=True),
        Series("cpu_pct", "CPU", theme.CPU_KV, real=True),
        # the committed demand over GPU + CPU blocks, a ratio on its own axis (under `off`
        # it passes 4): crossing 1× is when the abort became possible
        Series("committed_x", "committed × GPU+CPU", theme.COMMITTED, "commit×",
               "right"))),
    ("plot-queues", "groups", "groups", None, True, (
        Series("running", "running", theme.RUNNING, "run", real=True),
        Series("swapped", "swapped", theme.SWAPPED, "swap", real=True),
        # waiting (thousands in the seed) on its own right axis, so the swapped curve, the
        # one to watch, keeps the left axis' resolution
        Series("waiting", "waiting", theme.WAITING, "wait", "right"))),
    ("plot-tokens", "tokens/sim s", "tok/s", None, False, (
        Series("gen_tps", "generated", theme.GENERATED, "gen"),
        Series("prompt_tps", "prompt", theme.PROMPT, "prompt"))),
)
"""Every plot of the panel and its series, in one place: (id, title, short title, fixed y
range, whole-number ticks, series). A new line is one Series here."""

V1_PLOTS: tuple[Plot, ...] = (
    # V1 has no swap space: the CPU line is its offloading tier (a cache, not a queue of
    # victims), drawn only when the run recorded one
    ("plot-kv", "KV cache %", "KV%", (0.0, 100.0), False, (
        Series("gpu_pct", "GPU", theme.GPU_KV, real=True),  # a V1 log's KV cache usage
        Series("cpu_pct", "CPU tier", theme.CPU_TIER, "CPU"),  # V1StepRecord.cpu_chunks
        # the recompute tax of the tokens computed in each point's steps, in %: the thrash
        # while it lasts, 0 once a fix has stopped it
        Series("recompute_pct", "recompute %", theme.RECOMPUTED, "recomp"))),
    ("plot-queues", "requests", "reqs", None, True, (
        Series("running", "running", theme.RUNNING, "run", real=True),
        # preemptions by recompute this step: the thrash, on the left axis with running
        Series("n_recomputed", "preempted", theme.PREEMPTED, "pre"),
        Series("waiting", "waiting", theme.WAITING, "wait", "right", real=True))),
    ("plot-tokens", "tokens/sim s", "tok/s", None, False, (
        Series("gen_tps", "generated", theme.GENERATED, "gen"),
        Series("prompt_tps", "prompt", theme.PROMPT, "prompt"),
        # the part of the computed tokens that a preemption had thrown away
        Series("recomputed_tps", "recomputed", theme.RECOMPUTED, "recomp"))),
)
"""V1's plots (Header.engine "v1"): the same panes, in V1's vocabulary."""

PLOTS_BY_ENGINE: dict[str, tuple[Plot, ...]] = {"v0": PLOTS, "v1": V1_PLOTS}


def plots_for(view: RunView) -> tuple[Plot, ...]:
    """The plots in the vocabulary of the engine kind that made the run (V0 by default)."""
    return PLOTS_BY_ENGINE.get(view.engine, PLOTS)


def recorded(view: RunView, series: str) -> bool:
    """Whether the run's steps carry what `series` draws: the committed demand (recordings
    made before it do not), a V1 CPU tier (runs without one)."""
    if series == "committed_x":
        return committed_recorded(view)
    if series == "cpu_pct" and not view.kind.swaps:  # its CPU series is a tier's
        return cpu_tier_recorded(view)
    return True


def cpu_tier_recorded(view: RunView) -> bool:
    """Whether a V1 run's steps carry a CPU tier (vLLM's offloading connector was on)."""
    s = view.current
    return s is not None and bool(getattr(s, "cpu_chunks_total", 0))


def committed_recorded(view: RunView) -> bool:
    """Whether the run's steps carry the committed demand (recordings made before it do not)."""
    return view.current is not None and view.current.committed_blocks is not None


def markers_for(view: RunView) -> list[Marker]:
    """Policy changes and the abort as vertical lines."""
    marks = [Marker(p.step, theme.POLICY_MARKER, "policy") for p in view.policy_changes]
    if view.abort is not None:
        marks.append(Marker(view.clamp(view.abort.step), theme.ABORT_MARKER, "abort"))
    return marks


def runway_at(view: RunView, step: int | None = None) -> Runway | None:
    """The swap-runway forecast after `step` (default: the step the screen shows), measured
    under the policy in force there."""
    step = view.current_step if step is None else step
    if not view.steps or not view.kind.swaps:  # V1 has no swap space (its CPU tier is a cache)
        return None
    change = latest_change(view.policy_changes, step)
    return forecast(view.steps, step - view.first_step + 1,
                    changed_at=change.step if change is not None else None)


class RunPanel(Vertical):
    """Every widget of one run, driven by `show_text` (cheap, every tick) and `show_plots`
    (plotext, a few times a second)."""

    DEFAULT_CSS = """
    RunPanel {
        height: 1fr;
    }
    RunPanel > #plots {
        height: 45%;
        min-height: 9;
    }
    RunPanel > #lower {
        height: 1fr;
    }
    RunPanel #side {
        width: 64;
    }
    RunPanel #detail {
        height: 15;
    }
    RunPanel.-no-events #events {
        display: none;
    }
    RunPanel.-no-events #detail {
        height: 1fr;
    }
    RunPanel.-no-events #side {
        width: 62;
    }
    RunPanel.-no-detail #side {
        display: none;
    }
    """

    def __init__(self, mode: Mode, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.mode = mode
        self.pinned: int | None = None  # step pinned in the detail by choosing a table row
        self._late: tuple[tuple, LateFix | None] = ((), None)
        self._stall: tuple[tuple, Stall | None] = ((), None)  # (view, step shown): its stall

    def compose(self) -> ComposeResult:
        # The panes' classes for the terminal's size now, before the children are styled: set
        # on the first resize instead, they restyled all ~70 widgets again before the first
        # paint (~30 ms). The panel is the screen less the replay bar and the footer.
        width, height = self.app.size
        self.set_layout_classes(Size(width, height - 2), update=False)
        yield StatusBar(id="status")
        yield AbortBanner(id="abort-banner")
        with Horizontal(id="plots"):
            for plot_id, title, short, ylim, integer, _ in PLOTS:  # retitled per engine
                yield RunPlot(title, short_title=short, ylim=ylim, integer=integer, id=plot_id)
        with Horizontal(id="lower"):
            yield DecisionsTable(id="decisions")
            with Vertical(id="side"):
                yield StepDetail(id="detail")
                yield EventLog(id="events")

    # -- layout by priority ---------------------------------------------------------------

    def on_resize(self) -> None:
        self.apply_layout(self.size)

    def apply_layout(self, size: Size) -> None:
        """Collapse panes in a fixed order as the panel shrinks."""
        self.set_layout_classes(size)
        self.query_one(AbortBanner).compact = size.height < COMPACT_HEIGHT

    def set_layout_classes(self, size: Size, update: bool = True) -> None:
        """The panes' classes for `size`; `update=False`: before anything is styled."""
        width, height = size
        no_detail = width < DETAIL_MIN_WIDTH or height < DETAIL_MIN_HEIGHT
        self.set_class(no_detail or width < EVENTS_MIN_WIDTH or height < EVENTS_MIN_HEIGHT,
                       "-no-events", update=update)
        self.set_class(no_detail, "-no-detail", update=update)

    @property
    def collapsed(self) -> list[str]:
        """Panes hidden at the current size, in the order they went."""
        return [name for name, cls in (("events", "-no-events"), ("detail", "-no-detail"))
                if self.has_class(cls)]

    # -- data -------------------------------------------------------------------------------

    def late_fix(self, view: RunView) -> LateFix | None:
        """Whether the run aborted although a fix was on (cached: it reads the whole run)."""
        abort = view.abort
        if abort is None:
            return None
        key = (id(view), abort.step, len(view.policy_changes), len(view.steps))
        if self._late[0] != key:
            self._late = (key, late_fix(view.steps, view.policy_changes, abort.step))
        return self._late[1]

    def stall_at(self, view: RunView, shown: StepRecord | None) -> Stall | None:
        """The admission stall the shown V1 step is in, if the watchdog speaks there. A step's
        stall is fixed once it has arrived (it looks only back), so it is found once per step
        shown, not on every tick."""
        if shown is None or not view.kind.watches_stalls:
            return None
        key = (id(view), view.first_step, shown.step)
        if self._stall[0] != key:
            self._stall = (key, admission_stall(view.steps, shown.step - view.first_step,
                                                max_seqs=seat_limit(view.header)))
        return self._stall[1]

    def show_text(self, view: RunView, status: Status, banner_footer: str = "") -> None:
        """Status, banner, table, detail and events: cheap, incremental, every tick."""
        step = view.current_step
        runway = runway_at(view)
        self.query_one(StatusBar).show(view, status, runway)
        self.query_one(AbortBanner).show(view.abort, view.abort_visible, banner_footer,
                                         self.late_fix(view) if view.abort_visible else None,
                                         view.engine)
        self.query_one(DecisionsTable).show_until(view, step)
        shown = view.get(self.pinned) if self.pinned is not None else view.current
        self.query_one(StepDetail).show(shown, pinned=self.pinned is not None,
                                        show_wall=status.show_wall, axis=axis_of(view.header),
                                        stall=self.stall_at(view, shown),
                                        abort=view.abort if shown is not None
                                        and shown is view.aborting else None)
        events = self.query_one(EventLog)
        if self.mode == "live":
            events.show_until(view, None)
        else:
            events.show_until(view, step if not view.abort_visible or view.abort is None
                              else max(step, view.abort.step))

    def show_plots(self, view: RunView, lo: int, hi: int, cursor: int | None = None) -> None:
        """The plots over steps lo..hi, downsampled to each plot's width (series: PLOTS)."""
        marks = markers_for(view)
        xlim = (float(lo), float(max(hi, lo + 1)))
        self.query_one("#plot-tokens", RunPlot).title = \
            f"tokens/{axis_of(view.header).unit}"  # per second of the run's axis
        ref = view.reference
        for plot_id, title, short, _, _, series in plots_for(view):
            plot = self.query_one(f"#{plot_id}", RunPlot)
            if plot_id != "plot-tokens":
                plot.title, plot.short_title = title, short
            lines = []
            for s in series:
                if not recorded(view, s.name):
                    continue
                xs, ys = view.series(s.name, lo, hi, plot.points)
                lines.append(Line(s.label, xs, ys, s.color, s.axis, s.short))
            if ref is not None:  # the overlaid real log: dots, not lines, "real" in the legend
                for s in series:
                    # a V1 log has no swap queue but a `Waiting:` one, drawn in its place
                    if (s.real or (not ref.kind.swaps and s.name == "waiting")) and ref.has(s.name):
                        xs, ys = ref.series(s.name, view.column("sim_s"), view.first_step,
                                            lo, hi)
                        label = s.short or s.label
                        lines.append(Line(f"{label} (real log)", xs, ys, s.color,
                                          short=f"{label}·real", marker="•"))
            plot.show(lines, marks, xlim, cursor)

    # -- keys the screens bind ----------------------------------------------------------------

    def toggle_info(self) -> bool:
        """Show or hide vLLM's INFO lines in the event log; returns whether they are shown."""
        events = self.query_one(EventLog)
        events.show_info = not events.show_info
        return events.show_info

    def reset(self) -> None:
        """Unpin the detail and let the table follow the shown step again."""
        self.pinned = None
        self.query_one(DecisionsTable).follow()

    def on_step_selected(self, message: StepSelected) -> None:
        # Live: pin the detail to that step. The message bubbles on so replay can seek too.
        if self.mode == "live":
            self.pinned = message.step
