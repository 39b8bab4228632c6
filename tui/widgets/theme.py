"""Colours by meaning, taken from the app's theme: nothing in tui/ names a colour itself.

Widgets style their text with COMPONENT_CLASSES and theme variables ($primary, $error, ...) in
DEFAULT_CSS, so Textual's themes and NO_COLOR reach every cell. The plots cannot use CSS
(plotext draws RGB cells), so their series and markers name a theme variable here, and the
plot resolves it against the running app's theme each time it builds (`rgb`). One meaning, one
variable across plots: $error is swap (CPU KV, swapped groups, the abort), $primary the GPU side
(GPU KV, generated tokens).
"""

from __future__ import annotations

from typing import Callable, Mapping

from rich.style import Style
from textual.color import Color, ColorParseError

RGB = tuple[int, int, int]
Variable = str
"""The name of a theme variable, without the `$` ("primary", "error", ...)."""

GPU_KV: Variable = "primary"
CPU_KV: Variable = "error"
RUNNING: Variable = "success"
SWAPPED: Variable = "error"
WAITING: Variable = "primary"
GENERATED: Variable = "primary"
PROMPT: Variable = "success"
# the committed demand against GPU + CPU (KV plot, right axis); the KV plot has no other
# $success line. It was $warning, which textual-dark and textual-light give the colour of
# $accent, the policy marker's: the committed line and the `f` marker were one orange.
COMMITTED: Variable = "success"
# V1 (no swap space): its thrash is recompute, drawn in swap's colour; its CPU tier is a cache
PREEMPTED: Variable = "error"
RECOMPUTED: Variable = "error"
CPU_TIER: Variable = "success"
POLICY_MARKER: Variable = "warning"
"""A policy change: $warning differs from every series' colour on its plot, and from the
abort's, in each of Textual's built-in themes ($accent is $success in ansi-dark)."""
ABORT_MARKER: Variable = "error"
CURSOR: Variable = "foreground"
FOLDED: Variable = "foreground-darken-2"
"""The swatch of the one "• real" entry that stands for every overlaid series in a narrow
legend (each dot keeps its series' colour)."""
RUN_COLORS: tuple[Variable, ...] = ("primary", "success")
"""A/B replay: run A's and run B's lines on the shared plots (and their names' colour)."""

Roles = Callable[[str], Style]
"""A widget's component styles by role ("hot", "muted", ...): what pure text builders take so
they can be called without an app (tests), where every role is unstyled."""


def unstyled(_role: str) -> Style:
    return Style.null()


def component_roles(widget, prefix: str) -> Roles:
    """`role` -> the widget's `prefix--role` component class, as a partial Rich style."""

    def style(role: str) -> Style:
        return widget.get_component_rich_style(f"{prefix}--{role}", partial=True,
                                               default=Style.null())

    return style


def rgb(variables: Mapping[str, str], variable: Variable) -> RGB:
    """The theme variable's colour as RGB (alpha ignored: plotext draws opaque cells). A
    variable that is not a plain colour ("auto 60%") or that the theme lacks falls back to the
    theme's foreground."""
    for name in (variable, "foreground"):
        try:
            return Color.parse(variables[name]).rgb
        except (KeyError, ColorParseError):
            continue
    raise ValueError(f"the theme has neither ${variable} nor $foreground as a colour")


def variables_of(app) -> Mapping[str, str]:
    """The app's current theme variables (computed on first use before the app has styled)."""
    return app.theme_variables or app.get_css_variables()
