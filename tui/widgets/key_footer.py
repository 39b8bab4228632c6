"""The key footer: whole keys, in priority order, with `? help` and `q quit` pinned right.

Textual's Footer lays keys out left to right and lets what does not fit run under whatever is
docked at its right end, so at 80 columns a key was cut in half behind `? help`. Here `? help`
and `q quit` are docked right (as the command palette key is in Textual's own footer), the
footer turns compact below COMPACT_WIDTH columns, and the other keys are shown in the order the
screen binds them (its priority order) for as long as each fits whole; the first that does not
fit, and everything after it, is left out (all of them are in `?`).

Textual's Footer rebuilds its keys whenever a screen's bindings may have changed, closing a
modal included (the `g` prompt): some fifty widgets mounted and styled again, the largest part
of a `g N` jump. KeyFooter rebuilds only when what it would show differs, and at most once per
refresh however many reasons arrive together: a screen's start brings three (the bindings
become ready, the first resize, the bindings again), and a rebuild for each landed on the
user's first keys, ~20 ms of CPU each. The one rebuild still comes after the first paint, as
Textual's does: built before it, the keys delayed a replay's first frame by ~50 ms of CPU.
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
FIRST_BUILD_S = 0.05  # after the bindings are ready: the first paint goes first


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
    _rebuild_pending = False  # a rebuild is scheduled for after the next refresh

    def _shown_from(self) -> tuple:
        """What the keys depend on: the width and the screen's shown bindings."""
        bindings = tuple((binding.key, binding.action, binding.description, enabled)
                         for (_, binding, enabled, _) in self.screen.active_bindings.values()
                         if binding.show)
        return (self.size.width or self.app.size.width, bindings)

    def bindings_changed(self, screen) -> None:
        """Textual's Footer.bindings_changed, with its rebuild coalesced (`_rebuild_soon`)."""
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen:
            self._rebuild_soon()

    def _rebuild_soon(self) -> None:
        if not self._rebuild_pending:
            self._rebuild_pending = True
            if self._composed is None:  # the first keys: just after the first paint, and
                # not on the next refresh (an idle screen, or one under the `g` prompt, has
                # none before the user's first key, which would pay for the build)
                self.set_timer(FIRST_BUILD_S, self._rebuild)
            else:
                self.call_after_refresh(self._rebuild)

    async def _rebuild(self) -> None:
        self._rebuild_pending = False
        if self.is_attached and self._bindings_ready and self._shown_from() != self._composed:
            await self.recompose()

    def compose(self) -> ComposeResult:
        if self._bindings_ready:
            self._composed = self._shown_from()
        width = self.size.width or self.app.size.width
        compact = width < COMPACT_WIDTH
        # compact for this width before the keys mount (each key takes it at mount): set on
        # the first resize instead, it restyled the footer and every key once more before
        # the first paint
        self.set_reactive(Footer.compact, compact)
        self.set_class(compact, "-compact", update=False)
        pinned: list[FooterKey] = []
        keys: list[FooterKey] = []
        others: list[Widget] = []
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                widget.set_reactive(FooterKey.compact, compact)
                widget.set_class(compact, "-compact", update=False)
            if isinstance(widget, FooterKey) and widget.action in PINNED_ACTIONS:
                pinned.append(widget)
            elif isinstance(widget, FooterKey):
                keys.append(widget)
            else:
                others.append(widget)  # a binding group (none of ours has one)
        pinned.sort(key=lambda key: PINNED_ACTIONS.index(key.action))
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
            self._rebuild_soon()

    @property
    def shown_keys(self) -> list[str]:
        """The keys on screen, left to right (pinned last)."""
        return [key.key_display for key in self.query(FooterKey)]
