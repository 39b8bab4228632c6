"""Who hears what the engine process says, and the latest of each service message.

Two kinds of subscriber: typed items (sinks: `run`'s summary and progress line, tests) and
encoded lines (listeners: the server's fan-out). A recorded line (Header, Record) is encoded once,
on the engine thread, into the bytes a recording holds, and the same bytes go to every listener.
Service messages (Progress, RecordingStatus, StateChanged) come from whichever thread made them
and never go into a recording; the last of each is kept so a client attaching late starts from
the current state.

A subscriber that raises is an observatory bug: it is dropped and `on_failure` (the engine loop)
ends the run with an ObserverError naming it, while the recording and the other subscribers carry
on to the end record.
"""

from __future__ import annotations

from typing import Callable

from engine.run_state import RunState
from engine.stream.protocol import Policies, Progress, RecordingStatus, StateChanged, encode_line
from engine.stream.records import Header, Record

ServiceMessage = Progress | RecordingStatus | StateChanged | Policies
Item = Header | Record | ServiceMessage
ItemSink = Callable[[Item], None]
LineListener = Callable[[bytes, bool], None]
"""(line, recorded): recorded lines are the recording's own (Header, Records); the others are
service messages (Progress, RecordingStatus, StateChanged, Policies) that never go into a
recording."""
FailureHandler = Callable[[object, BaseException], None]


class Outbox:
    """The subscribers of one engine process, and its latest service messages."""

    def __init__(self) -> None:
        self.last_progress: Progress | None = None
        self.last_state = StateChanged(state=RunState.STARTING, step=0)
        self.last_recording = RecordingStatus(path=None)
        self.last_policies: Policies | None = None
        self.on_failure: FailureHandler = lambda subscriber, exc: None
        self._sinks: list[ItemSink] = []
        self._listeners: list[LineListener] = []

    # ---- subscribing -------------------------------------------------------------------
    def subscribe(self, sink: ItemSink) -> None:
        self._sinks.append(sink)

    def add_listener(self, listener: LineListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: LineListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    # ---- sending -----------------------------------------------------------------------
    def recorded(self, item: Header | Record, line: bytes) -> None:
        """A record of the run, already encoded as its recording line (engine thread)."""
        self._to_listeners(line, True)
        self._to_sinks(item)

    def publish(self, message: ServiceMessage) -> None:
        """A service message, from any thread; it becomes the latest of its kind."""
        kind = type(message)
        if kind is Progress:
            self.last_progress = message
        elif kind is StateChanged:
            self.last_state = message
        elif kind is Policies:
            self.last_policies = message
        else:
            self.last_recording = message
        self._to_listeners(encode_line(message), False)
        self._to_sinks(message)

    def _to_listeners(self, line: bytes, recorded: bool) -> None:
        for listener in list(self._listeners):
            try:
                listener(line, recorded)
            except Exception as exc:  # noqa: BLE001  same rule as for sinks
                self.remove_listener(listener)
                self.on_failure(listener, exc)

    def _to_sinks(self, item: Item) -> None:
        for sink in list(self._sinks):
            try:
                sink(item)
            except Exception as exc:  # noqa: BLE001  an observatory bug: see the docstring
                if sink in self._sinks:
                    self._sinks.remove(sink)
                self.on_failure(sink, exc)


class ServesOutbox:
    """What a server needs of the host it serves (engine.stream.server, fan-out), read from
    the host's `outbox`: the latest of each service message, for a client that attaches
    late, and the listeners its lines go to. EngineHost (a run it drives) and the attached
    Observer (an engine someone else drives) both serve one."""

    outbox: Outbox

    @property
    def last_state(self) -> StateChanged:
        return self.outbox.last_state

    @property
    def last_recording(self) -> RecordingStatus:
        return self.outbox.last_recording

    @property
    def last_progress(self) -> Progress | None:
        return self.outbox.last_progress

    @property
    def last_policies(self) -> Policies | None:
        return self.outbox.last_policies

    def add_listener(self, listener: LineListener) -> None:
        self.outbox.add_listener(listener)

    def remove_listener(self, listener: LineListener) -> None:
        self.outbox.remove_listener(listener)
