"""Every message the observatory's widgets and background readers post, in one place (Toolong
style).

Widgets post upwards (a seek, a chosen row). A run source's reader thread posts what arrived
from its engine process or file; it never touches widgets or sets flags for a timer to poll.
Records themselves travel through the source's queue, not inside messages: `RecordsArrived`
only says "there is more", and many of them coalesce into one (`can_replace`), so a burst of
thousands of records costs the UI one drain and one redraw.
"""

from __future__ import annotations

from textual.message import Message


class SeekRequested(Message):
    """The user pointed at a step (a click on a plot, a row chosen in the decisions table)."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step


class StepSelected(Message):
    """A decisions-table row was chosen: show that step in full."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step


# ---- from a run source's reader thread -------------------------------------------------------

class RecordsArrived(Message):
    """New records are waiting in the source's queue."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RecordsArrived)


class EngineStage(Message):
    """The engine process reached a start-up stage ("importing vLLM", "first step", ...)."""

    def __init__(self, stage: str, detail: str = "") -> None:
        super().__init__()
        self.stage = stage
        self.detail = detail


class CommandAcked(Message):
    """The engine answered a command (`ok` False: refused, `message` says why)."""

    def __init__(self, command_id: int, op: str, ok: bool, message: str,
                 step: int | None) -> None:
        super().__init__()
        self.command_id = command_id
        self.op = op
        self.ok = ok
        self.message = message
        self.step = step


class EngineStateChanged(Message):
    """running / paused / stopping, as the engine process reports it; a hold (the engine paused
    itself at the first sign of trouble, engine.host.attention) says why and for how long."""

    def __init__(self, state: str, step: int = 0, why: str = "",
                 hold_s: float | None = None) -> None:
        super().__init__()
        self.state = state
        self.step = step
        self.why = why
        self.hold_s = hold_s


class PoliciesRefused(Message):
    """The policies the engine cannot switch to, each with the one line that says why
    (engine.stream.protocol.Policies)."""

    def __init__(self, refused: dict[str, str]) -> None:
        super().__init__()
        self.refused = refused


class RecordingChanged(Message):
    """The engine process's recording: where, how big, and whether it failed."""

    def __init__(self, path: str | None, size: int, error: str | None,
                 closed: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.size = size
        self.error = error
        self.closed = closed  # the path of a recording that was just closed, whole

    def can_replace(self, message: Message) -> bool:
        # Textual drops the older of the two when this holds (message_pump: the queued one
        # asks about the next); an error or a closed file is never coalesced away, whichever
        # side it is on.
        return (isinstance(message, RecordingChanged) and self.error is None
                and self.closed is None and message.error is None and message.closed is None)


class StreamEnded(Message):
    """The source has nothing more to give: the run ended, the file ended, or the connection
    closed. `error` is a one-line reason when it ended badly; `refused` says the source never
    opened (a wrong token, a closed port, a peer that is not an observatory): there is nothing
    to show, and nothing will come."""

    def __init__(self, error: str | None = None, refused: bool = False) -> None:
        super().__init__()
        self.error = error
        self.refused = refused


class RunLoaded(Message):
    """A recording opened from its index (tui.run_window) has been read whole on a
    background thread: `view` (a RunView) replaces the window the screen opened on. `error`:
    the whole read failed (one line); the window stays."""

    def __init__(self, view: object | None, error: str | None = None) -> None:
        super().__init__()
        self.view = view
        self.error = error
