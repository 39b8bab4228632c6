"""`F`: choose any policy, including the watermark level (`f` switches only the preset's fix).

A policy the engine cannot take (the engine's Policies message: a rule this vLLM has no way in
for, or one its settings rule out) is listed disabled, with the one line the engine would refuse
it with, so that picking never ends in a refusal."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList
from textual.widgets.option_list import Option

from engine.errors import ConfigError
from engine.kinds import kind_of
from engine.policy import DEFAULT_WATERMARK, ENGINE_KINDS, parse_policy

V0_OPTIONS = (("off", "vLLM as released (the bug)"),
              ("strict", "no prefills while anything is swapped (PR #13539)"),
              ("watermark", "no prefills while CPU KV ≥ level"),
              ("reserve", "admit only what GPU + CPU can hold at worst (no abort)"))
V1_OPTIONS = (("off", "vLLM as configured (v1-thrash: #25538)"),
              ("full-isl", "vLLM's full-ISL rule (0.18: the hook's)"),
              ("whole-context", "whole context + prefills in flight fit"),
              ("least-computed", "preempt the least computed (PR #53723)"),
              ("whole-context+least-computed", "both"),
              ("skip-and-continue", "pass a refused request by (PR #35852)"),
              ("per-iteration-count", "seats per step, async (PR #45339)"))
"""The V1 engine's policies (no swap space, no watermark level)."""
OPTIONS = {"v0": V0_OPTIONS, "v1": V1_OPTIONS}
assert {name for name, _ in V1_OPTIONS} >= {n for n, kinds in ENGINE_KINDS.items() if "v1" in kinds}


def refusal_of(policy: str, refused: dict[str, str]) -> str | None:
    """Why the engine cannot take `policy` (a combination: its first refused part), or None."""
    try:
        parts = parse_policy(policy).parts
    except ConfigError as exc:
        return str(exc)
    return next((refused[part] for part in parts if part in refused), None)


def option_text(name: str, description: str, options: tuple[tuple[str, str], ...],
                fix: str | None = None) -> str:
    """`name  description`, the descriptions in one column: hand-padded names left the last
    V1 one (`whole-context+least-computed`) 7 cells out of line. The preset's fix (what `f`
    switches on) is marked `← f`."""
    width = max(len(other) for other, _ in options)
    mark = " ← f" if name == fix else ""
    return f"{name:<{width}}  {description}{mark}"


class PolicyPicker(ModalScreen[str | None]):
    """Dismisses with a policy string ("off", "strict", "watermark:0.7", "reserve") or None."""

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
    PolicyPicker #picker-keys {
        color: $text-muted;
    }
    """
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, current: str, engine: str = "v0", refused: dict[str, str] | None = None,
                 fix: str | None = None) -> None:
        super().__init__()
        self._current = parse_policy(current)
        self._options = OPTIONS[kind_of(engine).name]
        self._engine = engine
        self._refused = refused or {}
        self._fix = fix

    def compose(self) -> ComposeResult:
        level = self._current.watermark if self._current.name == "watermark" else DEFAULT_WATERMARK
        with Vertical():
            yield Label(f"policy now: [b]{self._current}[/b]")
            yield OptionList(*self._option_items(), id="picker-options")
            if "watermark" in dict(self._options):  # V0's: V1 has no watermark level
                yield Label("watermark level (0 < level ≤ 1) for watermark; enter here picks "
                            "it:")
                box = Input(value=f"{level:g}", id="picker-level")
                box.cursor_blink = False  # stable snapshots
                yield box
            yield Label("", id="picker-error")
            yield Label("↑↓ choose · enter applies · escape keeps the policy", id="picker-keys")

    def _option_items(self) -> list[Option]:
        """One option per policy; one the engine cannot take is disabled, its reason below."""
        items = []
        for name, text in self._options:
            why = refusal_of(name, self._refused)
            label = option_text(name, text, self._options, self._fix)
            if why is not None:
                label += f"\n    ✗ {why}"
            items.append(Option(Text(label), id=name, disabled=why is not None))
        return items

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        names = [name for name, _ in self._options]
        current = str(self._current) if self._current.name != "watermark" else "watermark"
        wanted = names.index(current) if current in names else 0
        if options.get_option_at_index(wanted).disabled:
            wanted = next(i for i, name in enumerate(names)
                          if not options.get_option_at_index(i).disabled)
        options.highlighted = wanted
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
