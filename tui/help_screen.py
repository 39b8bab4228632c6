"""Every key of the current screen, in one place (`?`)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


def describe_bindings(bindings: list[Binding]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for b in bindings:
        keys = b.key_display or b.key
        rows.append((keys, b.description or b.action))
    return rows


class HelpScreen(ModalScreen[None]):
    """A modal table of keys; any key closes it."""

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > Vertical {
        width: 72;
        height: auto;
        max-height: 90%;
        border: thick $primary;
        background: $surface;
        padding: 1 2;
    }
    """

    def __init__(self, title: str, rows: list[tuple[str, str]], notes: str = "") -> None:
        super().__init__()
        self._title = title
        self._rows = rows
        self._notes = notes

    def compose(self) -> ComposeResult:
        lines = [f"[b]{self._title}[/b]", ""]
        width = max((len(k) for k, _ in self._rows), default=4) + 2
        for key, text in self._rows:
            lines.append(f"[b cyan]{key.ljust(width)}[/]{text}")
        if self._notes:
            lines += ["", self._notes]
        lines += ["", "[dim]any key closes this[/dim]"]
        with Vertical():
            yield Static("\n".join(lines), id="help-text")

    def on_key(self, event) -> None:
        event.stop()
        self.dismiss(None)

    def on_click(self) -> None:
        self.dismiss(None)
