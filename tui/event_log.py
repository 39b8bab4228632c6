"""The run's story in lines: policy changes, swap-out bursts, bursts of requests, the abort with
vLLM's message, recording notices and vLLM's own log lines (captured, never printed over the
screen).

It draws the newest events that fit, at the bottom, up to the step the screen shows (all of
them live; those up to the cursor in replay). Drawing only what fits keeps it cheap: a
RichLog's per-write layout work cost the engine thread GIL time.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual.widget import Widget

from tui.run_view import Event, RunView

LEVEL_STYLES = {"info": "", "warning": "yellow", "error": "bold red"}
KIND_STYLES = {"policy": "bold green", "abort": "bold red", "notice": "cyan", "log": "dim",
               "burst": "magenta", "finished": "bold"}


def event_text(event: Event) -> Text:
    style = KIND_STYLES.get(event.kind) or LEVEL_STYLES.get(event.level, "")
    if event.kind == "log" and event.level != "info":
        style = LEVEL_STYLES[event.level]
    text = Text(f"{event.step:>6} ", "dim")
    text.append(event.text, style)
    return text


class EventLog(Widget):
    """The last events up to a step, newest at the bottom, wrapped to the width."""

    DEFAULT_CSS = """
    EventLog {
        height: 1fr;
        border: round $primary;
        border-title-color: $text;
        padding: 0 1;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._view: RunView | None = None
        self._key: tuple | None = None
        self._events: list[Event] = []

    def on_mount(self) -> None:
        self.border_title = "events"

    def show_until(self, view: RunView, step: int | None) -> None:
        """Events at or before `step` (None: all of them)."""
        key = (id(view), len(view.events), step)
        if key == self._key:
            return
        self._key = key
        limit = max(8, self.size.height)
        self._events = (view.events[-limit:] if step is None
                        else view.events_until(step, limit))
        self.refresh()

    def visible_texts(self) -> list[str]:
        return [e.text for e in self._events]

    def render(self) -> RenderableType:
        width, height = self.size.width, self.size.height
        if not self._events or width <= 0:
            return Text("no events yet", "dim")
        lines: list[Text] = []
        for event in reversed(self._events):
            wrapped = event_text(event).wrap(self.app.console, width, overflow="fold")
            lines[:0] = list(wrapped)
            if len(lines) >= height:
                break
        return Text("\n").join(lines[-height:])
