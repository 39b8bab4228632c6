"""The key footer, with `? help` and `q quit` pinned to its right end.

Textual's Footer lays keys out left to right and cuts what does not fit, so at 80 columns the
last entries, help and quit, were the ones to go. Here those two are docked right (as the
command palette key is in Textual's own footer) and the footer turns compact below
COMPACT_WIDTH columns, so they stay at every size.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import HorizontalGroup
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

PINNED_ACTIONS = ("help", "quit")  # docked right together, in this order
COMPACT_WIDTH = 140


class KeyFooter(Footer):
    DEFAULT_CSS = """
    KeyFooter > .-pinned {
        dock: right;
        width: auto;
        height: 1;
        background: $footer-background;
    }
    """

    def compose(self) -> ComposeResult:
        pinned: list[FooterKey] = []
        for widget in super().compose():
            if isinstance(widget, FooterKey) and widget.action in PINNED_ACTIONS:
                pinned.append(widget)
            else:
                yield widget
        pinned.sort(key=lambda key: PINNED_ACTIONS.index(key.action))
        if pinned:
            yield HorizontalGroup(*pinned, classes="-pinned")

    def on_resize(self) -> None:
        self.compact = self.size.width < COMPACT_WIDTH
