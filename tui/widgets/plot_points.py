"""Plot points onto plotext's canvas with numpy (tui.widgets.run_plot draws the rest).

Why: plotext joins and places points in pure Python, most of a chart's cost, and a jump to
another part of a long run redraws all three charts. `joined` fills in the joins at
braille-dot resolution, `paint_points` puts the points on the canvas plotext has built, cell for
cell where its own `scatter()` would (its coordinate rounding, its braille grouping, later
lines over earlier ones; tests/test_tui_plot_paint.py holds the two to the same cells). A module
of its own so that numpy is imported when the first points are drawn, not before a replay's
first frame.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from plotext import _utility as plotext_utility

MAX_JOIN_POINTS = 6  # dots added per segment at most; steep jumps look solid enough with 6


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


def canvas_dots(values: np.ndarray, lim: tuple[float, float], bins: int) -> np.ndarray:
    """plotext's `get_matrix_data` over an array: each value's dot on a canvas `bins` dots
    wide (or high), rounded exactly as plotext rounds (half up at the 8th decimal, then
    floor); a value that is not finite gets -1 (off the canvas)."""
    with np.errstate(invalid="ignore"):  # inf - inf: not drawn (below)
        scaled = (0.5 + (bins - 1) * (values - lim[0]) / (lim[1] - lim[0])) * 100000000
        low = np.floor(scaled)
        rounded = np.where(scaled - low < 0.5, low, np.ceil(scaled)) * 1e-08
    dots = np.full(len(rounded), -1, dtype=np.int64)
    finite = np.isfinite(rounded)
    dots[finite] = np.floor(rounded[finite])
    return dots


def _braille_chars() -> list[str]:
    """Braille character of each 8-bit dot mask; bit 7 - (2 * (3 - row) + column) is the dot
    at (column 0-1, row 0-3 from the bottom): plotext's own code order, read from its table."""
    chars = [" "] * 256
    for code, char in plotext_utility.braille_codes.items():
        chars[sum(bit << (7 - i) for i, bit in enumerate(code))] = char
    return chars


BRAILLE = _braille_chars()


def braille_cells(xd: np.ndarray, yd: np.ndarray, width: int, height: int
                  ) -> list[tuple[int, int, str]]:
    """(column, row, character) of every canvas cell that dots (xd, yd) light, for a canvas
    of width x height cells of 2 x 4 dots; dots off the canvas are dropped."""
    cx, cy = xd // 2, yd // 4
    inside = (cx >= 0) & (cx < width) & (cy >= 0) & (cy < height)
    cx, cy, xd, yd = cx[inside], cy[inside], xd[inside], yd[inside]
    bits = np.left_shift(1, 7 - (2 * (3 - yd % 4) + xd % 2))
    masks = np.zeros(width * height, dtype=np.int64)
    np.bitwise_or.at(masks, cy * width + cx, bits)
    lit = np.flatnonzero(masks)
    return [(int(k % width), int(k // width), BRAILLE[m])
            for k, m in zip(lit.tolist(), masks[lit].tolist())]


def marker_cells(xd: np.ndarray, yd: np.ndarray, width: int, height: int, marker: str
                 ) -> list[tuple[int, int, str]]:
    """(column, row, marker) of every canvas cell holding a point (one dot per cell)."""
    inside = (xd >= 0) & (xd < width) & (yd >= 0) & (yd < height)
    lit = np.unique(yd[inside] * width + xd[inside])
    return [(int(k % width), int(k // width), marker) for k in lit.tolist()]


def paint_points(matrix: Any, xs: np.ndarray, ys: np.ndarray, xlim: tuple[float, float],
                 ylim: tuple[float, float], marker: str, color: Any) -> None:
    """Points onto the canvas of a matrix plotext has built (its `monitor.matrix`), as its
    `scatter(xs, ys, marker=marker, color=color)` would have put them there."""
    cols, rows = matrix.Cols_canvas, matrix.Rows_canvas
    width, height = len(cols), len(rows)
    if width <= 0 or height <= 0:
        return
    if marker == "braille":
        cells = braille_cells(canvas_dots(xs, xlim, 2 * width), canvas_dots(ys, ylim, 4 * height),
                              width, height)
    else:
        cells = marker_cells(canvas_dots(xs, xlim, width), canvas_dots(ys, ylim, height),
                             width, height, marker)
    x0, y0 = cols.start, rows.start
    no_style = plotext_utility.no_color
    for x, y, char in cells:
        row, col = y + y0, x + x0
        matrix.marker[row][col] = char
        matrix.fullground[row][col] = color
        matrix.style[row][col] = no_style
