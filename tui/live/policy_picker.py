"""`F`: choose the policy, including the watermark level, instead of cycling with `f`."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList
from textual.widgets.option_list import Option

from engine.errors import ConfigError
from engine.policy import DEFAULT_WATERMARK, parse_policy


class PolicyPicker(ModalScreen[str | None]):
    """Dismisses with a policy string ("off", "strict", "watermark:0.7") or None."""

    DEFAULT_CSS = """
    PolicyPicker {
        align: center middle;
    }
    PolicyPicker > Vertical {
        width: 80;
        height: auto;
        border: thick $primary;
        background: $surface;
        padding: 1 2;
    }
    PolicyPicker OptionList {
        height: auto;
    }
    PolicyPicker #picker-error {
        color: $error;
    }
    """
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, current: str) -> None:
        super().__init__()
        self._current = parse_policy(current)

    def compose(self) -> ComposeResult:
        level = self._current.watermark if self._current.name == "watermark" else DEFAULT_WATERMARK
        with Vertical():
            yield Label(f"policy now: [b]{self._current}[/b]")
            yield OptionList(
                Option("off        vLLM as released (the bug)", id="off"),
                Option("strict     no prefills while anything is swapped (PR #13539)",
                       id="strict"),
                Option("watermark  no prefills while CPU KV ≥ level", id="watermark"),
                id="picker-options")
            yield Label("watermark level (0 < level ≤ 1) for watermark; enter here picks it:")
            box = Input(value=f"{level:g}", id="picker-level")
            box.cursor_blink = False  # stable snapshots
            yield box
            yield Label("", id="picker-error")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = ("off", "strict", "watermark").index(self._current.name)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._pick(event.option.id or "off")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._pick("watermark")

    def _pick(self, name: str) -> None:
        text = name
        if name == "watermark":
            text = f"watermark:{self.query_one('#picker-level', Input).value.strip()}"
        try:
            policy = parse_policy(text)
        except ConfigError as exc:
            self.query_one("#picker-error", Label).update(str(exc))
            return
        self.dismiss(str(policy))

    def action_cancel(self) -> None:
        self.dismiss(None)
