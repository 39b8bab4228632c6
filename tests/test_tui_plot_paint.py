"""The plots put their points on plotext's canvas with numpy (tui.widgets.plot_points.paint_points)
instead of plotext's per-point Python: every cell must be what plotext's own `scatter` draws,
for braille lines (2 x 4 dots a cell) and one-character markers (a real log's dots), on both
y axes, with points off the canvas and lines drawn over each other."""

from __future__ import annotations

import numpy as np
import pytest
from plotext._figure import _figure_class

from tui.widgets.plot_points import joined, paint_points

GREEN, RED, BLUE = (0, 200, 0), (220, 0, 0), (0, 0, 255)


def figure(width: int, height: int, xlim, ylims: dict[str, tuple[float, float]]):
    fig = _figure_class()
    fig.xlim(*xlim)
    for axis, (lo, hi) in ylims.items():
        fig.ylim(lo, hi, yside=axis)
        fig.yticks([lo, hi], [f"{lo:g}", f"{hi:g}"], yside=axis)
    fig.xticks([xlim[0], xlim[1]], [f"{xlim[0]:g}", f"{xlim[1]:g}"])
    fig.plotsize(width, height)
    fig._set_size(width, height)
    return fig


def matrix_of(fig):
    fig._set_sizes()
    fig._build_matrix()
    m = fig.monitor.matrix
    return m, [list(r) for r in m.marker], [list(r) for r in m.fullground]


LINES = [  # (xs, ys, marker, colour, y axis)
    ("braille", GREEN, "left"),
    ("braille", RED, "right"),
    ("•", BLUE, "left"),
]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("size", [(40, 17), (73, 9), (12, 6)])
def test_numpy_painter_draws_every_cell_plotext_scatter_draws(seed, size):
    rng = np.random.default_rng(seed)
    width, height = size
    xlim = (1000.0, 1000.0 + rng.integers(5, 5000))
    ylims = {"left": (0.0, 100.0), "right": (0.0, float(rng.integers(1, 9000)))}
    lines = []
    for marker, color, axis in LINES:
        n = int(rng.integers(1, 160))
        xs = np.sort(rng.uniform(xlim[0] - 50, xlim[1] + 50, n))  # some off the canvas
        top = ylims[axis][1]
        ys = rng.choice([0.0, top, top / 3], n) if seed % 2 else rng.uniform(-5, top * 1.1, n)
        if marker == "braille":
            plot_w, plot_h = max(10, width - 8), max(4, height - 5)
            xs, ys = joined(xs, ys, (xlim[1] - xlim[0]) / (2 * plot_w),
                            (top - 0.0) / (4 * plot_h))
        lines.append((xs, ys, marker, color, axis))

    by_plotext = figure(width, height, xlim, ylims)
    for xs, ys, marker, color, axis in lines:
        by_plotext.scatter(xs.tolist(), ys.tolist(), marker=marker, color=color, yside=axis)
    _, want_markers, want_colors = matrix_of(by_plotext)

    by_numpy = figure(width, height, xlim, ylims)
    for _, _, marker, color, axis in lines:
        by_numpy.scatter([], [], marker=marker, color=color, yside=axis)
    matrix, _, _ = matrix_of(by_numpy)
    for xs, ys, marker, color, axis in lines:
        paint_points(matrix, xs, ys, xlim, ylims[axis], marker, color)
    got_markers = [list(r) for r in matrix.marker]
    got_colors = [list(r) for r in matrix.fullground]

    assert sum(c not in " " for row in want_markers for c in row) > 0  # something was drawn
    assert got_markers == want_markers
    assert got_colors == want_colors


def test_points_that_are_not_numbers_are_not_drawn():
    fig = figure(30, 10, (0.0, 10.0), {"left": (0.0, 1.0)})
    fig.scatter([], [], marker="braille", color=GREEN)
    matrix, before, _ = matrix_of(fig)
    paint_points(matrix, np.array([1.0, np.nan, 3.0]), np.array([np.nan, 0.5, np.inf]),
                 (0.0, 10.0), (0.0, 1.0), "braille", GREEN)
    assert [list(r) for r in matrix.marker] == before
