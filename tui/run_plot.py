"""One textual-plotext chart of a few per-step series, with vertical markers and a cursor.

The screen hands it ready downsampled lines (a few hundred points, see RunView.series) at a
bounded rate; plotext's build runs only in `render`, i.e. only when `show` changed something.
A click on the chart area is turned into a SeekRequested for the step under the mouse.

Speed matters because a live run pays for every UI millisecond in engine steps (the GIL):

- plotext's `plot()` joins points in pure Python (~50 ms per chart); we interpolate the joins
  with numpy to braille-dot resolution and draw them with `scatter()` instead, which looks the
  same for a fraction of the cost;
- PlotextPlot turns plotext's output into an ANSI string and parses it back (Text.from_ansi),
  then Textual wraps that Text; we read plotext's character/colour matrix straight into Strips
  (Textual's line API), which skips both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from plotext import _utility as plotext_utility
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.strip import Strip
from textual_plotext import PlotextPlot

from tui.messages import SeekRequested


@dataclass(frozen=True)
class Line:
    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    color: str
    axis: str = "left"  # "right": plotted against a second y axis on the right


@dataclass(frozen=True)
class Marker:
    """A vertical line at a step: a policy change, the abort, the replay cursor."""

    step: int
    color: str


MAX_JOIN_POINTS = 6  # dots added per segment at most; steep jumps look solid enough with 6
CURSOR_STYLE = Style(color="white", bold=True)
_styles: dict[tuple, Style] = {}


def _style(fullground, style, background) -> Style:
    """plotext's (colour, style, background) for a cell as a Rich Style, via its ANSI code."""
    key = (str(fullground), str(style), str(background))
    cached = _styles.get(key)
    if cached is None:
        ansi = plotext_utility.colors_to_ansi(fullground, style, background)
        text = Text.from_ansi(ansi + "x")
        cached = text.spans[0].style if text.spans else Style()
        if isinstance(cached, str):
            cached = Style.parse(cached)
        _styles[key] = cached
    return cached


def joined(xs: np.ndarray, ys: np.ndarray, dot_x: float, dot_y: float
           ) -> tuple[np.ndarray, np.ndarray]:
    """The points plus linear fill-ins so consecutive points touch at braille-dot resolution."""
    if len(xs) < 2:
        return xs, ys
    dx, dy = np.diff(xs), np.diff(ys)
    steps = np.maximum(np.abs(dx) / max(dot_x, 1e-12), np.abs(dy) / max(dot_y, 1e-12))
    n = np.clip(np.ceil(steps), 1, MAX_JOIN_POINTS).astype(int)
    seg = np.repeat(np.arange(len(dx)), n)
    start = np.repeat(np.cumsum(n) - n, n)
    frac = (np.arange(int(n.sum())) - start + 1) / np.repeat(n, n)
    return (np.concatenate([xs[:1], xs[seg] + dx[seg] * frac]),
            np.concatenate([ys[:1], ys[seg] + dy[seg] * frac]))


class RunPlot(PlotextPlot):
    """A titled line chart over a step range."""

    DEFAULT_CSS = """
    RunPlot {
        height: 1fr;
        min-height: 8;
        width: 1fr;
        margin-right: 1;
        text-wrap: nowrap;
        text-overflow: clip;
    }
    """

    def __init__(self, title: str, *, ylim: tuple[float, float] | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.title = title
        self.ylim = ylim
        self._lines: list[Line] = []
        self._markers: list[Marker] = []
        self._xlim: tuple[float, float] = (0.0, 1.0)
        self._cursor: int | None = None
        self._x_span: tuple[int, int] | None = None  # screen columns of the x range, from build
        self._y_span: tuple[int, int] | None = None  # rows of the plotting area
        self._built: list[Text] | None = None  # plotext's output split in lines, sans cursor
        self._built_for: tuple | None = None

    @property
    def points(self) -> int:
        """How many points are worth drawing: braille gives two dots per column."""
        return max(50, (self.size.width - 8) * 2)

    def show(self, lines: list[Line], markers: list[Marker], xlim: tuple[float, float],
             cursor: int | None = None) -> None:
        """New data (rebuilds the chart) and/or a new cursor (only redrawn over the chart).

        Moving the replay cursor therefore costs no plotext build: the chart is cached and the
        cursor column is painted over it.
        """
        lo, hi = xlim
        xlim = (lo, hi if hi > lo else lo + 1)
        same = (xlim == self._xlim and markers == self._markers
                and len(lines) == len(self._lines)
                and all(a.xs is b.xs and a.ys is b.ys and a.color == b.color
                        for a, b in zip(lines, self._lines)))
        if not same:
            self._lines, self._markers, self._xlim = lines, markers, xlim
            self._built = None
        elif cursor == self._cursor:
            return
        self._cursor = cursor
        self.refresh()

    def _ylim(self, axis: str = "left") -> tuple[float, float]:
        if self.ylim is not None and axis == "left":
            return self.ylim
        top = max((float(np.max(line.ys)) for line in self._lines
                   if len(line.ys) and line.axis == axis), default=0.0)
        return 0.0, max(1.0, top * 1.05)

    def render_line(self, y: int) -> Strip:
        """Line API: the cached chart row, with the cursor painted over it."""
        key = (self.size, self.app.theme)
        if self._built is None or self._built_for != key:
            self._built = self._build()
            self._built_for = key
        if not 0 <= y < len(self._built):
            return Strip.blank(self.size.width)
        strip = self._built[y]
        if self._cursor is not None and self._x_span and self._y_span:
            top, bottom = self._y_span
            if top <= y <= bottom:
                lo, hi = self._xlim
                left, right = self._x_span
                column = left + round((self._cursor - lo) / (hi - lo) * (right - left))
                if left <= column <= right and column < strip.cell_length:
                    strip = Strip.join([strip.crop(0, column),
                                        Strip([Segment("┃", CURSOR_STYLE)], 1),
                                        strip.crop(column + 1, strip.cell_length)])
        return strip

    def _build(self) -> list[Strip]:
        """plotext's chart for the current data, one Strip per row (the expensive part)."""
        plt = self.plt
        plt.clear_data()
        plt.title(self.title)
        lo, hi = self._xlim
        axes = {line.axis for line in self._lines} or {"left"}
        ylims = {axis: self._ylim(axis) for axis in axes}
        width, height = max(10, self.size.width - 8), max(4, self.size.height - 4)
        for line in self._lines:
            if len(line.xs):
                ylo, yhi = ylims[line.axis]
                xs, ys = joined(np.asarray(line.xs, dtype=float), np.asarray(line.ys, dtype=float),
                                (hi - lo) / (2 * width), (yhi - ylo) / (4 * height))
                plt.scatter(xs.tolist(), ys.tolist(), marker="braille", color=line.color,
                            yside=line.axis)
        for marker in self._markers:
            if lo <= marker.step <= hi:
                plt.vertical_line(marker.step, color=marker.color)
        plt.xlim(lo, hi)
        ticks = sorted({int(round(t)) for t in np.linspace(lo, hi, 5)})
        plt.xticks(ticks, [f"{t:,}" for t in ticks])
        for axis, (ylo, yhi) in ylims.items():
            plt.ylim(ylo, yhi, yside=axis)
        width, height = self.size.width, self.size.height
        plt.plotsize(width, height)
        plt._set_size(width, height)  # see PlotextPlot.render: both are needed
        plt.theme(self._get_plotext_theme_name(self.app.theme))
        plt._set_sizes()
        plt._build_matrix()
        matrix = plt.monitor.matrix
        strips: list[Strip] = []
        plain: list[str] = []
        for row in range(matrix.rows - 1, -1, -1):
            markers = matrix.marker[row]
            fg, st, bg = matrix.fullground[row], matrix.style[row], matrix.background[row]
            segments: list[Segment] = []
            start = 0
            for col in range(1, matrix.cols + 1):
                if col == matrix.cols or fg[col] != fg[start] or st[col] != st[start] \
                        or bg[col] != bg[start]:
                    segments.append(Segment("".join(markers[start:col]),
                                            _style(fg[start], st[start], bg[start])))
                    start = col
            strips.append(Strip(segments, matrix.cols))
            plain.append("".join(markers))
        self._x_span, self._y_span = self._find_spans("\n".join(plain))
        return strips

    @staticmethod
    def _find_spans(plain: str) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """Columns and rows of the plotting area, from the frame's corners."""
        x_span = None
        top = bottom = None
        for y, row in enumerate(plain.split("\n")):
            if top is None and "┌" in row:
                top = y
            left, right = row.find("└"), row.rfind("┘")
            if 0 <= left < right:
                x_span, bottom = (left + 1, right - 1), y
                break
        y_span = (top + 1, bottom - 1) if top is not None and bottom is not None else None
        return x_span, y_span

    def step_at_column(self, x: int) -> int | None:
        if self._x_span is None:
            return None
        left, right = self._x_span
        if right <= left or not left <= x <= right:
            return None
        lo, hi = self._xlim
        return round(lo + (x - left) / (right - left) * (hi - lo))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        step = self.step_at_column(offset.x) if offset is not None else None
        if step is not None:
            event.stop()
            self.post_message(SeekRequested(step))
