"""The colours of the plots and their legends, in one place, as true colours.

Named ANSI colours are re-mapped by Textual's default theme (its Monokai ANSI palette draws
magenta as the same pink-red as red, and plotext's own names come out blue or green), so a
legend that says "magenta" or "yellow" can lie. Every colour here is an RGB value, drawn as is
under any theme, and the legends are drawn from the same values as the lines
(tests/test_screens_colors.py reads both back from the rendered cells).

One meaning, one colour across plots: red is swap (CPU KV, swapped groups), cyan is the GPU side
(GPU KV, generated tokens).
"""

from __future__ import annotations

RGB = tuple[int, int, int]

CYAN: RGB = (88, 209, 235)
RED: RGB = (244, 0, 95)
GREEN: RGB = (64, 214, 120)
YELLOW: RGB = (230, 219, 116)
VIOLET: RGB = (174, 129, 255)
ORANGE: RGB = (253, 151, 31)
WHITE: RGB = (240, 240, 240)

GPU_KV = CYAN
CPU_KV = RED
RUNNING = GREEN
SWAPPED = RED
WAITING = YELLOW
GENERATED = CYAN
PROMPT = VIOLET
POLICY_MARKER = ORANGE
ABORT_MARKER = RED
CURSOR = WHITE
RUN_COLORS: tuple[RGB, ...] = (CYAN, YELLOW)
"""A/B replay: run A's and run B's lines on the shared plots."""


def hex_color(rgb: RGB) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)
