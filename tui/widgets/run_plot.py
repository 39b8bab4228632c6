"""One textual-plotext chart of a few per-step series, with vertical markers and a cursor.

The screen hands it ready downsampled lines (a few hundred points, see RunView.series) at a
bounded rate; plotext's build runs only in `render`, i.e. only when `show` changed something.
A click on the chart area is turned into a SeekRequested for the step under the mouse.

Speed matters because a live run pays for every UI millisecond in engine steps (the GIL):

- plotext's `plot()` joins points in pure Python (~50 ms per chart); we interpolate the joins
  with numpy to braille-dot resolution instead, which looks the same for a fraction of the cost;
- plotext then places each point in Python too (~2 ms of a chart's ~2.5 at 120x40); it draws
  only the frame, axes and markers, and `paint_points` puts the points on its canvas with
  numpy, cell for cell where plotext's `scatter()` would (tests/test_tui_plot_paint.py);
- numpy (tui.widgets.plot_points) is imported when the first points are drawn, not with this
  module;
- PlotextPlot turns plotext's output into an ANSI string and parses it back (Text.from_ansi),
  then Textual wraps that Text; we read plotext's character/colour matrix straight into Strips
  (Textual's line API), which skips both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from plotext import _utility as plotext_utility
from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.strip import Strip
from textual_plotext import PlotextPlot

from tui.messages import SeekRequested
from tui.widgets import theme
from tui.widgets.theme import RGB, Variable


@dataclass(frozen=True)
class Line:
    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    color: Variable  # a theme variable (tui.widgets.theme), resolved when drawn
    axis: str = "left"  # "right": plotted against a second y axis on the right
    short: str = ""  # label for narrow plots ("" = label)
    marker: str = "braille"  # anything else: points only, not joined (a real log's windows)


@dataclass(frozen=True)
class Marker:
    """A vertical line at a step: a policy change, the abort."""

    step: int
    color: Variable
    label: str = ""  # legend entry ("policy", "abort"); markers of one label share one entry


MARKER_ORDER = {"policy": 0, "abort": 1}  # legend order, whatever order the markers come in
TITLE_STYLE = Style(bold=True)
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


def nice_ticks(top: float, count: int, integer: bool) -> list[float]:
    """0 and round multiples (1, 2, 2.5 or 5 x 10^k) up to `top`, about `count` of them; whole
    numbers only for counts (no "108.2 groups")."""
    top = max(top, 1.0)
    raw = top / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    if integer:
        step = max(1.0, math.ceil(step))
    return [i * step for i in range(int(math.floor(top / step + 1e-9)) + 1)]


def tick_label(value: float) -> str:
    """Short labels keep the axes narrow, so a right axis never runs into the next plot."""
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            scaled = value / limit
            return f"{scaled:.0f}{suffix}" if scaled == int(scaled) or scaled >= 10 \
                else f"{scaled:.1f}{suffix}"
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def step_label(value: float) -> str:
    return tick_label(value) if value >= 10_000 else f"{value:,.0f}"


def legend_text(title: str, short_title: str, lines: Sequence[Line],
                markers: Sequence[Marker], width: int,
                color_of: Callable[[Variable], RGB]) -> Text:
    """The plot's title and what each colour means, shortened until it fits `width`.

    Drawn from the same colours as the lines and markers (`color_of` resolves their theme
    variables, as the chart does), so it cannot disagree with them. A
    right-axis series is marked with "→". When nothing else fits, the overlaid series (dots: a
    real log) fold into one "• real" entry.
    """
    marks: dict[str, Variable] = {}
    for marker in sorted(markers, key=lambda m: MARKER_ORDER.get(m.label, len(MARKER_ORDER))):
        if marker.label and marker.label not in marks:
            marks[marker.label] = marker.color
    candidates = []
    dotted = [line for line in lines if line.marker != "braille"]
    for name, sep, short, with_marks, fold in ((title, "  ", False, True, False),
                                               (short_title, " ", False, True, False),
                                               (short_title, " ", True, True, False),
                                               (short_title, " ", True, False, False),
                                               ("", " ", True, True, False),
                                               ("", " ", True, True, True),
                                               ("", " ", True, False, False),
                                               ("", " ", True, False, True)):
        if fold and not dotted:
            continue
        text = Text(no_wrap=True, overflow="crop")
        if name:
            text.append(name, TITLE_STYLE)
            text.append(sep)
        entries: list[tuple[str, str, Variable]] = []
        for line in lines:
            if fold and line.marker != "braille":
                continue  # the overlaid series: one entry below says what dots are
            label = (line.short or line.label) if short else line.label
            entries.append(("━" if line.marker == "braille" else line.marker,
                            label + ("→" if line.axis == "right" else ""), line.color))
        if fold:
            entries.append((dotted[0].marker, "real", theme.FOLDED))
        if with_marks:
            entries += [("┃", label, color) for label, color in marks.items()]
        for i, (swatch, label, color) in enumerate(entries):
            if i:
                text.append(sep)
            style = Style(color=Color.from_rgb(*color_of(color)))
            text.append(swatch + (" " if sep == "  " else ""), style)
            text.append(label, style)
        candidates.append(text)
        if text.cell_len <= width:
            return text
    return candidates[-1]


class RunPlot(PlotextPlot):
    """A line chart over a step range, with its legend on the first row."""

    DEFAULT_CSS = """
    RunPlot {
        height: 1fr;
        min-height: 6;
        width: 1fr;
        margin-right: 1;
        text-wrap: nowrap;
        text-overflow: clip;
    }
    RunPlot.-right-axis {
        margin-right: 2;
    }
    """

    def __init__(self, title: str, *, short_title: str = "",
                 ylim: tuple[float, float] | None = None, integer: bool = False,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.title = title
        self.short_title = short_title or title
        self.ylim = ylim
        self.integer = integer  # counts: whole-number ticks only
        self.x_label: Callable[[float], str] = step_label  # x tick labels (steps by default)
        self._lines: list[Line] = []
        self._markers: list[Marker] = []
        self._xlim: tuple[float, float] = (0.0, 1.0)
        self._cursor: int | None = None
        self._x_span: tuple[int, int] | None = None  # screen columns of the x range, from build
        self._y_span: tuple[int, int] | None = None  # rows of the plotting area
        self._built: list[Strip] | None = None  # legend + plotext's rows, sans cursor
        self._built_for: tuple | None = None
        self._cursor_style = Style(bold=True)  # the theme's foreground, set by _build

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
            self.set_class(any(line.axis == "right" for line in lines), "-right-axis")
            self._built = None
        elif cursor == self._cursor:
            return
        self._cursor = cursor
        self.refresh()

    def _top(self, axis: str = "left") -> float:
        """The axis' upper limit: the fixed one, or 5% above the highest point."""
        if self.ylim is not None and axis == "left":
            return self.ylim[1]
        top = max((float(max(line.ys)) for line in self._lines
                   if len(line.ys) and line.axis == axis), default=0.0)
        return max(1.0, top * 1.05)

    def visible_markers(self) -> list[Marker]:
        lo, hi = self._xlim
        return [m for m in self._markers if lo <= m.step <= hi]

    def legend(self, width: int | None = None) -> Text:
        return legend_text(self.title, self.short_title, self._lines, self.visible_markers(),
                           self.size.width if width is None else width, self.color_of)

    def color_of(self, variable: Variable) -> RGB:
        """A series' or marker's colour under the app's current theme."""
        return theme.rgb(theme.variables_of(self.app), variable)

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
                                        Strip([Segment("┃", self._cursor_style)], 1),
                                        strip.crop(column + 1, strip.cell_length)])
        return strip

    def _build(self) -> list[Strip]:
        """The legend row, then plotext's chart for the current data, one Strip per row (the
        expensive part)."""
        width, height = self.size.width, self.size.height
        cursor = Color.from_rgb(*self.color_of(theme.CURSOR))
        self._cursor_style = Style(color=cursor, bold=True)
        legend = self.legend(width)
        legend.align("center", width)
        legend_strip = Strip(list(legend.render(self.app.console, end=""))).crop(0, width)
        plt = self.plt
        plt.clear_data()
        plt.title("")
        lo, hi = self._xlim
        axes = {line.axis for line in self._lines} or {"left"}
        rows = max(1, height - 4)
        ticks = {axis: nice_ticks(self._top(axis), max(2, min(5, rows // 3)),
                                  self.integer and not (self.ylim and axis == "left"))
                 for axis in axes}
        ylims = {axis: (0.0, self._top(axis)) for axis in axes}
        plot_w, plot_h = max(10, width - 8), max(4, height - 5)
        for line in self._lines:
            if len(line.xs):  # no points: plotext draws the line's axis, `_paint` the points
                plt.scatter([], [], marker=line.marker, color=self.color_of(line.color),
                            yside=line.axis)
        for marker in self.visible_markers():
            plt.vertical_line(marker.step, color=self.color_of(marker.color))
        plt.xlim(lo, hi)
        count = 5 if width >= 40 else 3  # evenly spaced, as numpy.linspace spaces them
        step = (hi - lo) / (count - 1)
        ticks_at = [i * step + lo for i in range(count - 1)] + [hi]
        xticks = sorted({int(round(t)) for t in ticks_at})
        plt.xticks(xticks, [self.x_label(t) for t in xticks])
        for axis, (ylo, yhi) in ylims.items():
            plt.ylim(ylo, yhi, yside=axis)
            plt.yticks(ticks[axis], [tick_label(t) for t in ticks[axis]], yside=axis)
        chart_h = max(1, height - 1)
        plt.plotsize(width, chart_h)
        plt._set_size(width, chart_h)  # see PlotextPlot.render: both are needed
        plt.theme(self._get_plotext_theme_name(self.app.theme))
        plt._set_sizes()
        plt._build_matrix()
        matrix = plt.monitor.matrix
        self._paint(matrix, ylims, plot_w, plot_h)
        strips: list[Strip] = [legend_strip]
        plain: list[str] = [legend.plain]
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

    def _paint(self, matrix, ylims: dict[str, tuple[float, float]], plot_w: int,
               plot_h: int) -> None:
        """Every line's points onto plotext's built matrix, in the lines' order, cell for cell
        what plotext's own scatter would draw (its coordinate rounding, its braille grouping,
        later lines over earlier ones), computed with numpy: plotext's per-point Python is
        most of a chart's cost, and a jump to another part of a long run redraws all three."""
        import numpy as np  # the lines' series have imported it already

        from tui.widgets.plot_points import joined, paint_points

        lo, hi = self._xlim
        for line in self._lines:
            if not len(line.xs):
                continue
            xs = np.asarray(line.xs, dtype=float)
            ys = np.asarray(line.ys, dtype=float)
            ylim = ylims[line.axis]
            color = self.color_of(line.color)
            if line.marker == "braille":
                xs, ys = joined(xs, ys, (hi - lo) / (2 * plot_w),
                                (ylim[1] - ylim[0]) / (4 * plot_h))
            paint_points(matrix, xs, ys, (lo, hi), ylim, line.marker, color)

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
