"""EngineHost: one Session plus the recording it owns, wired for the front ends.

The three jobs live apart (engine.host's package docstring has the map): EngineLoop owns the
Session and its thread, RecordingController owns the recording, CommandRouter turns typed
commands into calls at a step boundary. EngineHost only wires them and keeps the surface the
callers use (engine.child, `run` and `serve`, the server, the tests).
"""

from __future__ import annotations

from engine.host.loop import EngineLoop
from engine.host.outbox import ItemSink, LineListener, Outbox, ServesOutbox
from engine.host.recording import RecordingController
from engine.host.router import CommandRouter, Reply
from engine.run_state import RunState
from engine.spec import RunSpec
from engine.stream.protocol import Command, RecordingStatus
from engine.stream.records import RunFinished


class EngineHost(ServesOutbox):
    """Run `spec` and record it to `record` (a path, "-" for stdout, or None for no recording)."""

    def __init__(self, spec: RunSpec, record: str | None, *, freeze_gc: bool = True,
                 pace: float | None = None, hold_s: float | None = None) -> None:
        self.spec = spec
        self.outbox = Outbox()
        self.recording = RecordingController(record, self.outbox.publish)
        self.loop = EngineLoop(spec, self.recording, self.outbox, freeze_gc=freeze_gc,
                               pace=pace, hold_s=hold_s)
        self.router = CommandRouter(self.loop, self.recording)
        # The loop's lifecycle, as the callers know it.
        self.done = self.loop.done
        self.prepare = self.loop.prepare
        self.start = self.loop.start
        self.wait = self.loop.wait
        self.join = self.loop.join
        self.stop = self.loop.stop
        self.cancel_start = self.loop.cancel_start
        self.abandon = self.loop.abandon
        self.install_signal_handlers = self.loop.install_signal_handlers
        self.open_recording = self.recording.open
        self.subscribe = self.outbox.subscribe

    # ---- what the run is doing ------------------------------------------------------------
    @property
    def session(self):
        return self.loop.session

    @property
    def finished(self) -> RunFinished | None:
        return self.loop.finished

    @property
    def start_error(self) -> str | None:
        return self.loop.start_error

    @property
    def state(self) -> RunState:
        return self.loop.state

    @property
    def closed_recordings(self) -> list[RecordingStatus]:
        """Each file this host wrote, as it was when it closed."""
        return self.recording.closed

    # ---- commands -------------------------------------------------------------------------
    def submit(self, command: Command, source: str, reply: Reply | None = None, *,
               allow_path: bool = False) -> None:
        """Apply a typed command (engine.host.router.CommandRouter.route)."""
        self.router.route(command, source, reply, allow_path=allow_path)

    def command(self, op: str, arg: str | int | None, source: str, reply: Reply | None = None,
                *, command_id: int = 0, allow_path: bool = False) -> None:
        """Apply a command given as (op, arg); exactly one Ack goes to `reply`."""
        self.router.route_op(op, arg, source, reply, command_id=command_id,
                             allow_path=allow_path)


__all__ = ["EngineHost", "ItemSink", "LineListener"]
