"""Drawn from what the screen last showed: one mixin for the widgets a screen paints with
`show(...)` from its run, instead of each keeping the call's arguments by hand to draw them
again when it is resized or the theme changes.

`shown` is a Textual reactive holding the last `show()`'s arguments; `watch_shown` draws them
(`draw`, the widget's own). It updates on every assignment (`always_update`): the screen shows
the same RunView object as it grows, so equal arguments may still draw something new, and
`draw` keeps its own key of what it last drew to skip unchanged work (a screen shows every
widget on every tick). A resize draws `shown` again (a width may choose another layout: the
key says whether it does); a new theme forgets the key (`forget`) first, since the text was
styled in the old theme's colours.
"""

from __future__ import annotations

from typing import Any

from textual.reactive import reactive


class Redrawn:
    """Mix into a Widget before it: `show(...)` sets `self.shown = (args...)`; `draw(*args)`
    paints them; `forget()` drops what `draw` keeps to skip work."""

    shown: reactive[tuple | None] = reactive(None, init=False, repaint=False,
                                             always_update=True)

    def watch_shown(self, shown: tuple | None) -> None:
        if shown is not None:
            self.draw(*shown)

    def draw(self, *args: Any) -> None:
        raise NotImplementedError

    def forget(self) -> None:
        """Drop what `draw` keeps to skip unchanged work (nothing by default)."""

    def redraw(self, fresh: bool = True) -> None:
        """Draw `shown` again: from scratch (`fresh`, after a theme change), or only if it
        would now look different (after a resize)."""
        widget: Any = self
        if fresh:
            self.forget()
        if self.shown is not None and widget.is_mounted:
            self.draw(*self.shown)

    def on_resize(self) -> None:
        self.redraw(fresh=False)

    def notify_style_update(self) -> None:
        """A new theme: draw again in its colours (once the new styles are in place)."""
        widget: Any = self
        super().notify_style_update()  # type: ignore[misc]
        if widget.is_mounted:
            widget.call_later(self.redraw)
