"""The engine process: one Session plus the recording it owns, and the commands that steer it.

Every front end goes through this one path: `observatory run` in-process, `observatory serve`
for TCP clients, and the live TUI's local child (engine.child). The TUI never writes recordings,
so killing it (even with kill -9) cannot leave one without its end record.

Who does what (imports run downwards; none of these knows the one above it):

    facade.py     EngineHost: wires the three below; the surface callers use
    router.py     CommandRouter: a typed command (engine.stream.protocol) checked now, applied
                  at the next step boundary, answered by exactly one Ack
    loop.py       EngineLoop: imports vLLM, owns the Session and its thread, the run's
                  lifecycle and signals
    recording.py  RecordingController: the one owner of the recording: open, write, toggle at
                  a boundary, seal, discard, RecordingStatus
    outbox.py     Outbox: the subscribers (typed items, encoded lines) and the latest service
                  messages
"""

from engine.host.facade import EngineHost

__all__ = ["EngineHost"]
