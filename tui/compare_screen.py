"""Two recordings side by side: CPU KV % and swapped groups of both on shared axes.

This is the fix-off vs fix-on view. It reuses RunPlot and StatusBar; each run keeps its own
status line, and both runs share one x range so their steps line up.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer

from tui.abort_banner import AbortBanner
from tui.help_screen import HelpScreen, describe_bindings
from tui.palette import ABORT_MARKER, POLICY_MARKER
from tui.run_plot import Line, Marker, RunPlot
from tui.run_view import RunView
from tui.status_bar import Status, StatusBar

COLORS = ("red", "green")


class CompareScreen(Screen):
    BINDINGS = [
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
    ]
    DEFAULT_CSS = """
    CompareScreen #compare-plots {
        height: 1fr;
    }
    CompareScreen StatusBar {
        height: 2;
    }
    """

    def __init__(self, views: list[RunView], names: list[str]) -> None:
        super().__init__()
        self.views = views
        self.names = names

    def compose(self) -> ComposeResult:
        for i, _ in enumerate(self.views):
            yield StatusBar(id=f"status-{i}")
            yield AbortBanner(id=f"banner-{i}")
        with Vertical(id="compare-plots"):
            yield RunPlot(self._title("CPU KV %"), ylim=(0, 100), id="compare-cpu")
            yield RunPlot(self._title("swapped groups"), id="compare-swapped")
        yield Footer()

    def _title(self, what: str) -> str:
        parts = [f"{name} {color}" for name, color in zip(self.names, COLORS)]
        return f"{what}: " + ", ".join(parts)

    def on_mount(self) -> None:
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        for i, (view, name) in enumerate(zip(self.views, self.names)):
            if view.steps:
                view.cursor = view.last_step
            state = "aborted" if view.abort else (view.finished.reason if view.finished
                                                  else "replay")
            color = COLORS[i % len(COLORS)]
            self.query_one(f"#status-{i}", StatusBar).show(
                view, Status(state=state, show_wall=False, source=f"[{color}] {name}"))
            self.query_one(f"#banner-{i}", AbortBanner).show(view.abort, view.abort is not None)
        lo = min((v.first_step for v in self.views if v.steps), default=0)
        hi = max((v.last_step for v in self.views if v.steps), default=1)
        for plot_id, series in (("#compare-cpu", "cpu_pct"), ("#compare-swapped", "swapped")):
            plot = self.query_one(plot_id, RunPlot)
            lines, marks = [], []
            for i, (view, name) in enumerate(zip(self.views, self.names)):
                xs, ys = view.series(series, view.first_step, view.last_step, plot.points)
                lines.append(Line(name, xs, ys, COLORS[i % len(COLORS)]))
                marks += [Marker(p.step, POLICY_MARKER) for p in view.policy_changes]
                if view.abort is not None:
                    marks.append(Marker(view.abort.step - 1, ABORT_MARKER))
            plot.show(lines, marks, (float(lo), float(max(hi, lo + 1))))

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen("compare keys", describe_bindings(self.BINDINGS),
                                        "Yellow lines: policy changes. Red lines: aborts."))

    def action_quit(self) -> None:
        self.app.exit(0)
