"""Where a screen's records come from: the one interface between the UI and a run.

A screen never sees an engine, a socket or a file. It sees a `RunSource`: `start(target)` begins
reading on a background thread, which queues records and posts typed messages
(tui.messages) to `target`; the screen drains the queue when `RecordsArrived` comes in, and
sends commands with `send`. Two kinds exist:

- `EngineSource`: an engine process (a local child, or `observatory serve` reached over TCP)
  through an `engine.stream.client.EngineLink`. It takes commands.
- `FollowSource`: a recording another process is still writing, or stdin. Read-only.

A whole recording needs no source: it is loaded before the screen opens. Which of these a
replay opens on is the reader's choice (engine.stream.reader.choose: live, indexed or checking),
made into what the screen needs by `open_replay`: a FollowSource for a live file, a window of a
long file's end with the whole read going on behind it, or the whole file read and checked.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

from textual.message_pump import MessagePump

from engine.errors import ObservatoryError
from engine.stream.records import Header, Record
from tui.messages import (CommandAcked, EngineStage, EngineStateChanged, PoliciesRefused,
                          RecordingChanged, RecordsArrived, StreamEnded)

if TYPE_CHECKING:  # the run index and the replay's loader load late: `live` needs neither
    from engine.stream.reader import IndexedFile
    from tui.run_window import WholeRunLoader
    from tui.run_view import RunView

Item = Header | Record
QUIT_WAIT_S = 0.5


class RunSource(Protocol):
    """What a screen needs from wherever its run comes from."""

    controllable: bool  # whether `send` reaches an engine

    def start(self, target: MessagePump) -> None:
        """Begin reading on a background thread; post messages to `target`."""

    def drain(self) -> list[Item]:
        """Every record queued since the last drain, in order (UI thread)."""

    def send(self, op: str, arg: str | int | None = None) -> int | None:
        """Send a command (policy, pause, resume, burst, stop, record, pace); its id, or None if
        this source takes no commands or the engine is gone."""

    def close(self) -> None:
        """Stop reading and let go of the engine (it finishes its recording on its own)."""


class SourceRefused(ObservatoryError):
    """The source could not be opened at all (connect refused, unreachable, not an
    observatory; an engine child that cannot start). One line, as every ObservatoryError."""


class _QueuedSource:
    """The reader-thread half every source shares: queue records, post one coalescing
    RecordsArrived per burst, and always end with exactly one StreamEnded."""

    controllable = False

    def __init__(self) -> None:
        self._queue: collections.deque[Item] = collections.deque()
        self._target: MessagePump | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, target: MessagePump) -> None:
        self._target = target
        self._thread = threading.Thread(target=self._run, name=type(self).__name__,
                                        daemon=True)
        self._thread.start()

    def drain(self) -> list[Item]:
        queue, items = self._queue, []
        while queue:
            items.append(queue.popleft())
        return items

    def send(self, op: str, arg: str | int | None = None) -> int | None:
        return None

    def close(self) -> None:
        self._stop.set()

    def detach(self) -> None:
        """Post nothing more to the screen (it has moved on to another source)."""
        self._target = None

    def _post(self, message: Any) -> None:
        if self._target is not None:
            self._target.post_message(message)

    def _push(self, item: Item) -> None:
        self._queue.append(item)
        self._post(RecordsArrived())

    def _run(self) -> None:
        error: str | None = None
        refused = False
        try:
            self._read()
        except SourceRefused as exc:  # it never opened: the reason is all there is
            error, refused = str(exc), True
        except ObservatoryError as exc:  # RecordingError, PeerError: one line
            error = str(exc)
        except ConnectionError as exc:  # the link ended without the run's end record
            error = str(exc) or "the connection to the engine closed"
        except OSError as exc:
            error = f"{type(exc).__name__}: {exc}"
        self._post(StreamEnded(error, refused=refused))

    def _read(self) -> None:
        raise NotImplementedError


class FollowSource(_QueuedSource):
    """A growing recording (plain or .zst) or stdin, read in the reader's live mode
    (engine.stream.reader.follow)."""

    def __init__(self, path: str, lenient: bool = False) -> None:
        super().__init__()
        self.path = path
        self.lenient = lenient

    def _read(self) -> None:
        from engine.stream.reader import follow

        for item in follow(self.path, stop=self._stop, lenient=self.lenient):
            self._push(item)


class EngineSource(_QueuedSource):
    """An engine process, through an EngineLink that `open_link` makes on the reader thread
    (spawning a child or connecting to a server can take a moment, or fail with one line)."""

    controllable = True

    def __init__(self, open_link: Callable[[], Any]) -> None:
        super().__init__()
        self._open_link = open_link
        self._link: Any = None
        self._ready = threading.Event()

    @property
    def pid(self) -> int | None:
        return getattr(self._link, "pid", None)

    def send(self, op: str, arg: str | int | None = None) -> int | None:
        link = self._link
        if link is None:
            return None
        try:
            return link.send(op, arg)
        except OSError:
            return None  # the engine is gone; StreamEnded says so

    def close(self) -> None:
        """Ask the engine to stop and give it QUIT_WAIT_S to close its recording; a child that
        needs longer finishes on its own (it has been told to stop, and it sees the socket
        close). Idempotent."""
        if self._stop.is_set():
            return
        super().close()
        link = self._link
        if link is not None:
            link.close(timeout=QUIT_WAIT_S)

    def wait_gone(self) -> None:
        """Close, and return once this source's engine process has exited (waited for by
        PID: engine.stream.client.EngineLink.wait_gone). Blocking: for a reader thread."""
        self.close()
        if self._thread is not None:
            self._thread.join()  # the link exists, or never will
        if self._link is not None:
            self._link.wait_gone()

    def _read(self) -> None:
        from engine.stream import protocol

        try:
            self._link = link = self._open_link()
        except ObservatoryError as exc:
            raise SourceRefused(str(exc)) from None
        if self._stop.is_set():
            link.close()
            return
        for item in link.items():
            if isinstance(item, protocol.Disconnected):
                if not self._stop.is_set():
                    raise ConnectionError(item.reason)
                return
            message = _service_message(item, protocol)
            if message is None:
                self._push(item)
            elif message is not _IGNORED:
                self._post(message)


_IGNORED = object()


def _service_message(item: Any, protocol: Any) -> Any:
    """The UI message for a service-only line, _IGNORED for one the UI has no use for, or None
    for a record (which goes to the queue)."""
    if isinstance(item, protocol.Progress):
        return EngineStage(item.stage, item.detail)
    if isinstance(item, protocol.Ack):
        return CommandAcked(item.id, item.op, item.ok, item.message, item.step)
    if isinstance(item, protocol.StateChanged):
        return EngineStateChanged(item.state, item.step, item.why, item.hold_s)
    if isinstance(item, protocol.Policies):
        return PoliciesRefused(dict(item.refused))
    if isinstance(item, protocol.RecordingStatus):
        return RecordingChanged(item.path, item.bytes, item.error, item.closed)
    if isinstance(item, (protocol.Welcome, protocol.Closing, protocol.Refused)):
        return _IGNORED
    return None
# ---- what a replay opens on ---------------------------------------------------------------

@dataclass
class ReplayOpening:
    """A replay's run as the reader chose to read it: the view the screen opens on, what to
    say about the file, and for a live file its source, for a long indexed one the file (the
    window's frames) and the whole read going on behind it."""

    view: RunView
    notice: str | None = None
    source: RunSource | None = None
    indexed: IndexedFile | None = None
    loader: WholeRunLoader | None = None


def open_replay(path: str, lenient: bool = False, *, follow: bool = False,
                window_from_steps: int | None = None, hold: threading.Event | None = None,
                freeze: bool = False) -> ReplayOpening:
    """What a replay of `path` opens on, in the mode the reader chooses for it: live when
    following; a window of the end of a recording of at least `window_from_steps` steps whose
    index the reader vouches for (None: never a window), its whole read waiting for `hold`
    (tests) and frozen out of the collector's sight once done if `freeze`; otherwise the whole
    file, read and checked first. Raises RecordingError (one line) for a damaged file."""
    from engine.stream.reader import IndexDamaged, Mode, choose
    from tui.run_view import RunView

    choice = choose(path, follow=follow, window_from_steps=window_from_steps)
    if choice.mode is Mode.LIVE:
        return ReplayOpening(RunView(), source=FollowSource(path, lenient=lenient))
    if choice.mode is Mode.INDEXED:
        from tui.run_window import WholeRunLoader, window_at

        indexed = choice.indexed
        try:
            view = window_at(indexed, choice.header, indexed.index.last_step)
        except (IndexDamaged, OSError):
            return _whole(path, lenient)
        notice = None if indexed.index.finished else ("the recording has no end record: the "
                                                      "run did not finish cleanly")
        return ReplayOpening(view, notice, indexed=indexed,
                             loader=WholeRunLoader(path, lenient, hold, indexed, freeze))
    return _whole(path, lenient)


def load_view(path: str, lenient: bool = False) -> tuple[RunView, str | None]:
    """A whole recording as a RunView, plus a notice if it was truncated or had bad lines.

    Raises engine.errors.RecordingError with the reader's message.
    """
    opening = _whole(path, lenient)
    return opening.view, opening.notice


def _whole(path: str, lenient: bool) -> ReplayOpening:
    from engine.stream.reader import load
    from tui.run_view import RunView

    view = load(path, lenient=lenient, into=RunView)
    notes = []
    if view.truncated:
        notes.append("the recording is truncated (its writer stopped mid-line); "
                     "replaying what is there")
    if view.skipped_lines:
        notes.append(f"{view.skipped_lines} corrupt line(s) skipped (--lenient)")
    if view.finished is None and not view.truncated:
        notes.append("the recording has no end record: the run did not finish cleanly")
    return ReplayOpening(view, "; ".join(notes) or None)
