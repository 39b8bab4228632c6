"""The monitor itself: status, abort banner, three plots, decisions table, step detail and event
log, all rendered from one RunView.

Both the live and the replay screen compose exactly this widget and call the same two methods;
they differ only in what drives the view (an engine session or a cursor over a recording) and in
the range they ask the plots to show. That is how replay reuses the live widgets.
"""

from __future__ import annotations

from typing import Literal

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical

from tui.abort_banner import AbortBanner
from tui.decisions_table import DecisionsTable
from tui.event_log import EventLog
from tui.messages import StepSelected
from tui.run_plot import Line, Marker, RunPlot
from tui.run_view import RunView
from tui.status_bar import Status, StatusBar
from tui.step_detail import StepDetail

POLICY_MARKER = "yellow"
ABORT_MARKER = "red"

Mode = Literal["live", "replay"]


def markers_for(view: RunView) -> list[Marker]:
    """Policy changes and the abort as vertical lines."""
    marks = [Marker(p.step, POLICY_MARKER) for p in view.policy_changes]
    if view.abort is not None:
        marks.append(Marker(max(view.first_step, view.abort.step - 1), ABORT_MARKER))
    return marks


class RunPanel(Vertical):
    """Every widget of one run, driven by `show_text` (cheap, every tick) and `show_plots`
    (plotext, a few times a second)."""

    DEFAULT_CSS = """
    RunPanel {
        height: 1fr;
    }
    RunPanel > #plots {
        height: 45%;
        min-height: 10;
    }
    RunPanel > #lower {
        height: 1fr;
    }
    RunPanel #side {
        width: 64;
    }
    """

    def __init__(self, mode: Mode, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.mode = mode
        self.pinned: int | None = None  # step pinned in the detail by choosing a table row

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield AbortBanner(id="abort-banner")
        with Horizontal(id="plots"):
            yield RunPlot("KV cache %: GPU=cyan CPU=red", ylim=(0, 100), id="plot-kv")
            yield RunPlot("groups: run=green swap=red wait=yel→", id="plot-queues")
            yield RunPlot("tokens/sim s: gen=cyan prompt=magenta", id="plot-tokens")
        with Horizontal(id="lower"):
            yield DecisionsTable(id="decisions")
            with Vertical(id="side"):
                yield StepDetail(id="detail")
                yield EventLog(id="events")

    def show_text(self, view: RunView, status: Status, banner_footer: str = "") -> None:
        """Status, banner, table, detail and events: cheap, incremental, every tick."""
        step = view.current_step
        self.query_one(StatusBar).show(view, status)
        self.query_one(AbortBanner).show(view.abort, view.abort_visible, banner_footer)
        self.query_one(DecisionsTable).show_until(view, step)
        shown = view.step(self.pinned) if self.pinned is not None else view.current
        self.query_one(StepDetail).show(shown, pinned=self.pinned is not None,
                                        show_wall=status.show_wall)
        events = self.query_one(EventLog)
        if self.mode == "live":
            events.show_until(view, None)
        else:
            events.show_until(view, step if not view.abort_visible or view.abort is None
                              else max(step, view.abort.step))

    def show_plots(self, view: RunView, lo: int, hi: int, cursor: int | None = None) -> None:
        """The three plots over steps lo..hi, downsampled to each plot's width."""
        marks = markers_for(view)
        xlim = (float(lo), float(max(hi, lo + 1)))
        kv = self.query_one("#plot-kv", RunPlot)
        queues = self.query_one("#plot-queues", RunPlot)
        tokens = self.query_one("#plot-tokens", RunPlot)

        def line(plot: RunPlot, name: str, label: str, color: str, axis: str = "left") -> Line:
            xs, ys = view.series(name, lo, hi, plot.points)
            return Line(label, xs, ys, color, axis)

        kv.show([line(kv, "gpu_pct", "GPU", "cyan"), line(kv, "cpu_pct", "CPU", "red")],
                marks, xlim, cursor)
        queues.show([line(queues, "running", "running", "green"),
                     line(queues, "swapped", "swapped", "red"),
                     # waiting (thousands in the seed) on its own right axis, so the
                     # swapped curve, the one to watch, keeps the left axis' resolution
                     line(queues, "waiting", "waiting", "yellow", "right")],
                    marks, xlim, cursor)
        tokens.show([line(tokens, "gen_tps", "generated", "cyan"),
                     line(tokens, "prompt_tps", "prompt", "magenta")], marks, xlim, cursor)

    def reset(self) -> None:
        """Unpin the detail and let the table follow the shown step again."""
        self.pinned = None
        self.query_one(DecisionsTable).follow()

    def on_step_selected(self, message: StepSelected) -> None:
        # Live: pin the detail to that step. The message bubbles on so replay can seek too.
        if self.mode == "live":
            self.pinned = message.step
