"""`g`: type a step number to go there (replay)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class GotoStep(ModalScreen[int | None]):
    """Dismisses with a step number, or None."""

    DEFAULT_CSS = """
    GotoStep {
        align: center middle;
    }
    GotoStep > Vertical {
        width: 48;
        height: auto;
        border: thick $primary;
        background: $surface;
        padding: 1 2;
    }
    GotoStep #goto-error {
        color: $error;
    }
    """
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, first: int, last: int) -> None:
        super().__init__()
        self._first, self._last = first, last

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"go to step ({self._first:,}–{self._last:,}):")
            box = Input(placeholder="step number", type="integer", id="goto-input")
            box.cursor_blink = False  # stable snapshots
            yield box
            yield Label("", id="goto-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            step = int(event.value.replace(",", "").replace("_", ""))
        except ValueError:
            self.query_one("#goto-error", Label).update("type a whole number")
            return
        self.dismiss(step)

    def action_cancel(self) -> None:
        self.dismiss(None)
