"""`e`: pick which engine to watch behind an `observatory exec --serve` hub (every engine the
user's command built, in any of its processes, named host/pid/index)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option


class EnginePicker(ModalScreen[str | None]):
    """Dismisses with an engine's name, or None."""

    DEFAULT_CSS = """
    EnginePicker {
        align: center middle;
    }
    EnginePicker > Vertical {
        width: 80;
        height: auto;
        border: thick $primary;
        background: $surface;
        padding: 1 2;
    }
    EnginePicker OptionList {
        height: auto;
        max-height: 20;
    }
    """
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, engines: list, current: str | None) -> None:
        super().__init__()
        self._engines = engines
        self._current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"watching: [b]{self._current or '?'}[/b]; pick an engine:")
            yield OptionList(*(Option(f"{e.name}  {e.engine or '?'}"
                                      + ("  (watching)" if e.name == self._current else ""),
                                      id=f"engine-{i}")
                               for i, e in enumerate(self._engines)), id="engine-options")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        index = int(str(event.option.id).removeprefix("engine-"))
        self.dismiss(self._engines[index].name)

    def action_cancel(self) -> None:
        self.dismiss(None)
