"""The key footer: whole keys, in priority order, with `? help` and `q quit` pinned right.

Textual's Footer lays keys out left to right and lets what does not fit run under whatever is
docked at its right end, so at 80 columns a key was cut in half behind `? help`. Here `? help`
and `q quit` are docked right (as the command palette key is in Textual's own footer), the
footer turns compact below COMPACT_WIDTH columns, and the other keys are shown in the order the
screen binds them (its priority order) for as long as each fits whole; the first that does not
fit, and everything after it, is left out (all of them are in `?`).

Textual's Footer rebuilds its keys whenever a screen's bindings may have changed, closing a
modal included (the `g` prompt): some fifty widgets mounted and styled again, the largest part
of a `g N` jump. KeyFooter rebuilds only when what it would show differs.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.containers import HorizontalGroup
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

PINNED_ACTIONS = ("help", "quit")  # docked right together, in this order
COMPACT_WIDTH = 140


def key_width(key: FooterKey, compact: bool) -> int:
    """Cells one key takes in the footer, by Textual's footer CSS: compact, `key desc` and a
    one-cell margin; otherwise ` key desc ` with the description's right padding."""
    text = cell_len(key.key_display)
    if key.description:
        text += cell_len(key.description) + 1
    return text + 1 if compact else text + 2


def fitting(keys: list[FooterKey], room: int, compact: bool) -> list[FooterKey]:
    """The longest prefix of `keys` that fits in `room` cells."""
    shown, used = [], 0
    for key in keys:
        used += key_width(key, compact)
        if used > room:
            break
        shown.append(key)
    return shown


class KeyFooter(Footer):
    DEFAULT_CSS = """
    KeyFooter > .-pinned {
        dock: right;
        width: auto;
        height: 1;
        background: $footer-background;
    }
    """

    _composed: tuple | None = None  # what the keys were built from (`_shown_from`)

    def _shown_from(self) -> tuple:
        """What the keys depend on: the width and the screen's shown bindings."""
        bindings = tuple((binding.key, binding.action, binding.description, enabled)
                         for (_, binding, enabled, _) in self.screen.active_bindings.values()
                         if binding.show)
        return (self.size.width or self.app.size.width, bindings)

    def bindings_changed(self, screen) -> None:
        if (self._bindings_ready and self.is_attached and screen is self.screen
                and self._composed is not None and self._shown_from() == self._composed):
            return  # the same keys: nothing to rebuild
        super().bindings_changed(screen)

    def compose(self) -> ComposeResult:
        if self._bindings_ready:
            self._composed = self._shown_from()
        pinned: list[FooterKey] = []
        keys: list[FooterKey] = []
        others: list[Widget] = []
        for widget in super().compose():
            if isinstance(widget, FooterKey) and widget.action in PINNED_ACTIONS:
                pinned.append(widget)
            elif isinstance(widget, FooterKey):
                keys.append(widget)
            else:
                others.append(widget)  # a binding group (none of ours has one)
        pinned.sort(key=lambda key: PINNED_ACTIONS.index(key.action))
        width = self.size.width or self.app.size.width
        compact = width < COMPACT_WIDTH
        room = width - sum(key_width(key, compact) for key in pinned)
        yield from fitting(keys, room, compact)
        yield from others
        if pinned:
            yield HorizontalGroup(*pinned, classes="-pinned")

    def on_resize(self) -> None:
        compact = self.size.width < COMPACT_WIDTH
        if compact != self.compact:
            self.compact = compact
        if self._bindings_ready:
            self.call_after_refresh(self.recompose)

    @property
    def shown_keys(self) -> list[str]:
        """The keys on screen, left to right (pinned last)."""
        return [key.key_display for key in self.query(FooterKey)]
