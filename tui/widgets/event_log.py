"""The run's story in lines: policy changes, swap-out bursts, bursts of requests, the abort with
vLLM's message, recording notices and vLLM's own log lines (captured, never printed over the
screen).

It draws the newest events that fit, at the bottom, up to the step the screen shows (all of
them live; those up to the cursor in replay). Drawing only what fits keeps it cheap: a
RichLog's per-write layout work cost the engine thread GIL time.

vLLM's log lines are kept in their place: INFO lines (the config dump, periodic metrics) are
hidden unless `show_info` is set (the screens bind a key to it), repeated lines are folded into
one entry with a count ("×10,000", the EOS warning logged once per request; the preemption
warning that differs only in its numbers), and the newest entry is never cut: if it does not fit
it is shortened at its end, and older entries give way first, each whole: an entry that fits only
in part is left out, not shown from its middle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.console import RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from engine.safe_text import safe
from tui.run_view import Event, RunView
from tui.widgets.redraw import Redrawn
from tui.widgets.theme import Roles, component_roles, unstyled

LEVEL_ROLES = {"info": "", "warning": "warning", "error": "error"}
KIND_ROLES = {"policy": "policy", "abort": "error", "notice": "notice", "log": "log",
              "burst": "burst", "finished": "finished"}
ROLES = ("warning", "error", "policy", "notice", "log", "burst", "finished")
"""What an entry is styled by: each an `event-log--ROLE` component class."""
LEVEL_MARKS = {"info": "i", "warning": "⚠", "error": "✗"}
_LOG = re.compile(r"^vLLM (?P<level>\w+) (?P<logger>[\w.]+): (?P<message>.*?)"
                  r"(?: \(×(?P<repeats>\d+)\))?$", re.S)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
MESSAGE_CHARS = 110
FETCH_FACTOR = 4  # events read per line of height, so hidden and folded ones leave no gaps


@dataclass
class Entry:
    """One line group of the log: an event, or several log lines folded into one."""

    event: Event
    text: str  # what is drawn (vLLM's lines shortened: level mark, logger's last part)
    count: int = 1  # log lines this entry stands for
    first_step: int = 0


def is_info_log(event: Event) -> bool:
    return event.kind == "log" and event.level == "info"


def log_parts(event: Event) -> tuple[str, str, str, int] | None:
    """(level, logger, message, repeats) of a vLLM log event, None for other events."""
    if event.kind != "log":
        return None
    match = _LOG.match(event.text)
    if match is None:
        return None
    return (match["level"], match["logger"], match["message"],
            int(match["repeats"]) if match["repeats"] else 1)


def first_sentence(message: str, limit: int = MESSAGE_CHARS) -> str:
    """vLLM's long lines (the config dump, the preemption advice) cut to their first sentence;
    the whole line is in the recording."""
    if len(message) <= limit:
        return message
    end = message.find(". ")
    if 0 < end < limit:
        return message[:end + 1] + " …"
    return message[:limit - 1] + "…"


def fold(events: list[Event], show_info: bool) -> list[Entry]:
    """Hide INFO log lines (unless asked) and fold log lines that differ only in numbers into
    one entry, kept at the newest one's place."""
    entries: list[Entry] = []
    folded: dict[str, Entry] = {}
    for event in events:
        if is_info_log(event) and not show_info:
            continue
        parts = log_parts(event)
        if parts is None:
            entries.append(Entry(event, event.text, 1, event.step))
            continue
        level, logger, message, repeats = parts
        key = f"{level}|{logger}|{_NUMBER.sub('#', message)}"
        text = f"{LEVEL_MARKS.get(event.level, '')} {logger.rsplit('.', 1)[-1]}: " \
            f"{first_sentence(message)}"
        previous = folded.get(key)
        if previous is not None:
            entries.remove(previous)
            entry = Entry(event, text, previous.count + repeats, previous.first_step)
        else:
            entry = Entry(event, text, repeats, event.step)
        folded[key] = entry
        entries.append(entry)
    return entries


def entry_text(entry: Entry, roles: Roles = unstyled) -> Text:
    event = entry.event
    role = KIND_ROLES.get(event.kind) or LEVEL_ROLES.get(event.level, "")
    if event.kind == "log" and event.level != "info":
        role = LEVEL_ROLES[event.level]
    text = Text(f"{event.step:>6} ", "dim")
    if entry.count > 1:
        text.append(f"×{entry.count:,} ", "bold reverse")
    text.append(safe(entry.text), roles(role) if role else "")  # log lines reach the terminal
    if entry.count > 1 and entry.first_step != event.step:
        text.append(f" (since step {entry.first_step:,})", "dim")
    return text


class EventLog(Redrawn, Widget):
    """The last events up to a step, newest at the bottom, wrapped to the width; drawn from
    what the screen last showed it (tui.widgets.redraw), as many as its height holds."""

    DEFAULT_CSS = """
    EventLog {
        height: 1fr;
        border: round $primary;
        border-title-color: $text;
        padding: 0 1;
    }
    EventLog > .event-log--warning { color: $text-warning; }
    EventLog > .event-log--error { color: $text-error; text-style: bold; }
    EventLog > .event-log--policy { color: $success; text-style: bold; }
    EventLog > .event-log--notice { color: $text-primary; }
    EventLog > .event-log--log { text-style: dim; }
    EventLog > .event-log--burst { color: $text-accent; }
    EventLog > .event-log--finished { text-style: bold; }
    """
    COMPONENT_CLASSES = {f"event-log--{role}" for role in ROLES}

    show_info: reactive[bool] = reactive(False)
    """Whether vLLM's INFO lines are shown (hidden by default: config dump, metrics)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._key: tuple | None = None
        self._entries: list[Entry] = []
        self._hidden_info = 0

    def on_mount(self) -> None:
        self._title()

    def _title(self) -> None:
        hidden = f" · {self._hidden_info} INFO hidden" if self._hidden_info else ""
        self.border_title = f"events{hidden}"

    def watch_show_info(self) -> None:
        self.forget()
        if self.shown is not None:
            self.draw(*self.shown)

    def show_until(self, view: RunView, step: int | None) -> None:
        """Events at or before `step` (None: all of them)."""
        self.shown = (view, step)

    def draw(self, view: RunView, step: int | None) -> None:
        # the height is in the key: a resize that shows more or fewer lines fetches again
        key = (id(view), len(view.events), step, self.show_info, self.size.height)
        if key == self._key:
            return
        self._key = key
        limit = max(8, self.size.height) * FETCH_FACTOR
        events = view.events[-limit:] if step is None else view.events_until(step, limit)
        self._hidden_info = 0 if self.show_info else sum(map(is_info_log, events))
        self._entries = fold(events, self.show_info)
        self._title()
        self.refresh()

    def visible_texts(self) -> list[str]:
        return [entry.event.text for entry in self._entries]

    def forget(self) -> None:
        self._key = None

    def render(self) -> RenderableType:
        width, height = self.size.width, self.size.height
        if not self._entries or width <= 0 or height <= 0:
            return Text("no events yet", "dim")
        lines: list[Text] = []
        roles = component_roles(self, "event-log")
        for index, entry in enumerate(reversed(self._entries)):
            wrapped = list(entry_text(entry, roles).wrap(self.app.console, width, overflow="fold"))
            if index == 0 and len(wrapped) > height:
                # the newest entry is never cut: shorten its end, keep its start
                wrapped = wrapped[:height]
                last = wrapped[-1]
                last.truncate(max(1, width - 1))
                last.append("…")
            if index and len(lines) + len(wrapped) > height:
                # an older entry shown only in part read as a line with no start: leave it
                # out, and keep the newest at the bottom
                lines[:0] = [Text()] * (height - len(lines))
                break
            lines[:0] = wrapped
            if len(lines) >= height:
                break
        return Text("\n").join(lines[-height:])
