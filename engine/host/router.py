"""CommandRouter: a typed command in, exactly one Ack out.

Commands (engine.stream.protocol: SetPolicy, Pause, Resume, AddBurst, Stop, ToggleRecording) can
come from any thread: the local owner's socket, a TCP client's, `run`'s signal handler, a test.
The router checks each one *now*, on the caller's thread, so a bad one is refused at once in one
line, and turns a good one into a call that applies it at the next step boundary, on the engine
thread. The Ack is sent after the command's effect is in the stream (the session's `done`
callback has the Ack's shape: ok, message, step).

Dispatch is by the command's type, through one table (`_CHECKS`): a command type without an entry
is a bug the tests catch (test_service_commands), not a silent fall-through.
"""

from __future__ import annotations

import math
from typing import Callable

import msgspec

from engine.errors import ConfigError
from engine.policy import parse_policy
from engine.stream.protocol import (USAGE, Ack, AddBurst, BadCommand, Command, Pause, Resume,
                                    SetPace, SetPolicy, Stop, ToggleRecording, make_command)

Reply = Callable[[Ack], None]
Done = Callable[..., None]  # (ok, message="", step=None): an Ack without its id and op
Apply = Callable[[object, Done], None]  # (session, done): hands the command to the session
MAX_BURST = 100_000


def pace_text(pace: float | None) -> str:
    """A pace as the Ack and the live screen say it."""
    return f"paced {pace:g} steps/s" if pace else "as fast as it goes"


class CommandRouter:
    """Check commands and hand them to the engine loop (`loop`) at its next step boundary;
    recording toggles go to `recording` (the RecordingController) there."""

    def __init__(self, loop, recording) -> None:
        self._loop = loop  # engine.host.loop.EngineLoop
        self._recording = recording  # engine.host.recording.RecordingController

    def route(self, command: Command, source: str, reply: Reply | None = None, *,
              allow_path: bool = False) -> None:
        """Apply `command`, labelled `source` in the stream ("tui", "remote:<client>").
        `allow_path`: the sender owns the engine process and may name recording files.
        Exactly one Ack goes to `reply`: at once, on this thread, if the command is refused
        before reaching the engine; otherwise from the engine thread."""
        command_id, op = getattr(command, "id", 0), getattr(command, "op", "?")

        def done(ok: bool, message: str = "", step: int | None = None) -> None:
            if reply is not None:
                reply(Ack(id=command_id, op=op, ok=ok, message=message, step=step))

        check = _CHECKS.get(type(command))
        if check is None:
            return done(False, f"not a command: {type(command).__name__}")
        try:
            apply = check(self, command, source, allow_path)
        except (ConfigError, BadCommand) as exc:
            return done(False, str(exc))
        self._loop.when_ready(lambda session: apply(session, done),
                              lambda why: done(False, f"the engine did not start: {why}"))

    def route_op(self, op: str, arg: str | int | None, source: str, reply: Reply | None = None,
                 *, command_id: int = 0, allow_path: bool = False) -> None:
        """`route` for a command given as (op, arg), the shape the TUI's keys speak."""
        try:
            command = make_command(op, arg, command_id)
        except BadCommand as exc:
            if reply is not None:
                reply(Ack(id=command_id, op=op, ok=False, message=str(exc)))
            return
        self.route(command, source, reply, allow_path=allow_path)

    # ---- one check per command type: validate now, return what applies it later ----------
    def _policy(self, command: SetPolicy, source: str, allow_path: bool) -> Apply:
        if not isinstance(command.policy, str):
            raise ConfigError(USAGE["policy"])
        policy = parse_policy(command.policy)
        return lambda session, done: session.set_policy(policy, source, done)

    def _burst(self, command: AddBurst, source: str, allow_path: bool) -> Apply:
        size = command.size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int)
                                 or not 1 <= size <= MAX_BURST):
            raise ConfigError(f"burst size must be an integer from 1 to {MAX_BURST}, "
                              f"got {size!r}")
        return lambda session, done: session.add_burst(size, source, done)

    def _pause(self, command: Pause, source: str, allow_path: bool) -> Apply:
        return lambda session, done: session.pause(done)

    def _resume(self, command: Resume, source: str, allow_path: bool) -> Apply:
        return lambda session, done: session.resume(done)

    def _stop(self, command: Stop, source: str, allow_path: bool) -> Apply:
        return lambda session, done: self._loop.stop_session(done)

    def _pace(self, command: SetPace, source: str, allow_path: bool) -> Apply:
        scale = command.scale
        if (isinstance(scale, bool) or not isinstance(scale, (int, float))
                or not math.isfinite(scale) or scale <= 0):
            raise ConfigError(USAGE["pace"] + f", got {scale!r}")
        return lambda session, done: done(True, pace_text(session.scale_pace(float(scale))))

    def _record(self, command: ToggleRecording, source: str, allow_path: bool) -> Apply:
        target = command.target
        if target not in (None, "on", "off"):
            if not allow_path:
                raise ConfigError("a remote client cannot choose the server's file names: "
                                  "send record on, off, or nothing to toggle")
            if not isinstance(target, str) or not target or target == "-":
                raise ConfigError(f"record needs on, off or a file path, got {target!r}")
        recording = self._recording

        def apply(session, done: Done) -> None:
            def toggle(step: int) -> tuple[bool, str]:
                spec = msgspec.structs.replace(session.spec, policy=session.policy)
                return recording.toggle(target, step, session.header, spec)

            session.at_boundary(toggle, done)

        return apply


_CHECKS: dict[type, Callable[[CommandRouter, Command, str, bool], Apply]] = {
    SetPolicy: CommandRouter._policy,
    AddBurst: CommandRouter._burst,
    Pause: CommandRouter._pause,
    Resume: CommandRouter._resume,
    Stop: CommandRouter._stop,
    ToggleRecording: CommandRouter._record,
    SetPace: CommandRouter._pace,
}
"""The dispatch table: one entry per command type in engine.stream.protocol.COMMAND_TYPES."""
