"""The engine service protocol: newline-delimited JSON, one msgspec Struct per line, tagged by
`kind` like the records.

Why it looks like this:

- The server sends the record stream *exactly* as a recording holds it (the Header line, then
  one line per Record), so a client is a recording reader that happens to read a socket, and a
  `serve` stream piped to a file is a valid recording once the service-only lines are dropped.
- Service-only messages (acknowledgements, start-up progress, recording status, state changes)
  are interleaved on the same connection. They never go into recordings: their kinds are
  distinct from every record kind, so a client tells them apart by `kind` alone.
- Versioned handshake: the client's first line is Hello{protocol, token, client}; the server
  answers Welcome, or Refused{reason} and closes. Nothing of the run is sent before Welcome.
- After the handshake the client sends commands: a tagged union of Structs, one per command
  (SetPolicy, Pause, Resume, AddBurst, Stop, ToggleRecording; `kind` is the command's name), so
  the server decodes a line straight into its type and dispatches on it (the model: vLLM's
  EngineCoreRequestType with its msgspec-encoded requests). Each gets exactly one Ack with the
  same id; Ack.op is the command's kind. A command that changes the run shows in the stream too
  (PolicyChanged.source is "tui" for the local child's owner, "remote:<client>" for a TCP
  client). A command line that is well formed but wrong (a kind this server does not know, a
  field of the wrong type) is refused with an Ack(ok=False) saying why in one line, and the
  connection stays; a line that is not a command at all ends the connection (Closing).
- A connection the server ends on purpose gets Closing{reason} first (garbage from the client,
  engine start-up failure, server shutdown). A client that falls too far behind is cut off
  without one (the line could not reach it anyway); the server logs why.

Compatibility: add fields with defaults. Changing the meaning of a field or a message bumps
PROTOCOL_VERSION; a server refuses a client that speaks another version. Version 2: commands
became one Struct per command (version 1 sent {"kind": "command", "op": ..., "arg": ...}).
A new command kind is compatible: a server that does not know it refuses it in its Ack (`pace`
came after version 2).
"""

from __future__ import annotations

from typing import Union

import msgspec

from engine.errors import PeerError
from engine.run_state import RunState
from engine.stream.records import Header, Record

PROTOCOL_VERSION = 2
MAX_LINE_BYTES = 64 * 1024  # a client line longer than this is garbage


# ---- client -> server -------------------------------------------------------------------

class Hello(msgspec.Struct, tag="hello", tag_field="kind", kw_only=True):
    protocol: int
    token: str
    client: str  # a short name for this client; a TCP client's commands are "remote:<client>"
    # `observatory exec --serve`'s hub (engine.attached.hub): which engine ("host/pid/index"),
    # "?" for the list (an Engines line), None for the newest. A plain serve ignores it.
    engine: str | None = None


class _Command(msgspec.Struct, tag_field="kind", kw_only=True):
    """What every command carries: `id`, echoed by its Ack. Each subclass is one command; its
    tag (the `kind` on the wire) is the command's name, `op`."""

    id: int

    @property
    def op(self) -> str:
        return type(self).__struct_config__.tag


class SetPolicy(_Command, tag="policy"):
    """Switch the scheduler policy at the next step boundary: "off", "strict",
    "watermark[:F]"."""

    policy: str


class Pause(_Command, tag="pause"):
    """Hold the engine between two steps until Resume (or Stop)."""


class Resume(_Command, tag="resume"):
    """Go on after Pause."""


class AddBurst(_Command, tag="burst"):
    """Add a burst of requests at the next boundary; `size` None: the spec's burst_size."""

    size: int | None = None


class Stop(_Command, tag="stop"):
    """Stop at the next step boundary; the recording gets its end record."""


class ToggleRecording(_Command, tag="record"):
    """Recording on or off at the next boundary: `target` "on", "off", None (toggle), or, from
    the engine process's own owner only, a file path to record to."""

    target: str | None = None


class SetPace(_Command, tag="pace"):
    """Scale the engine's pace (steps per second, engine.session) by `scale`: 2 doubles it,
    0.5 halves it. Wall clock only: no decision changes, nothing goes into the stream; the Ack's
    message says the new pace."""

    scale: float = 2.0


Command = Union[SetPolicy, Pause, Resume, AddBurst, Stop, ToggleRecording, SetPace]
COMMAND_TYPES: tuple[type[_Command], ...] = (SetPolicy, Pause, Resume, AddBurst, Stop,
                                             ToggleRecording, SetPace)
COMMAND_OPS = tuple(t.__struct_config__.tag for t in COMMAND_TYPES)
_BY_OP = dict(zip(COMMAND_OPS, COMMAND_TYPES))
_ARG_FIELD = {SetPolicy: "policy", AddBurst: "size", ToggleRecording: "target",
              SetPace: "scale"}
USAGE = {"policy": "policy needs a policy name: on V0 off, strict, watermark[:F] or reserve; "
                    "on V1 off, full-isl, whole-context, least-computed or skip-and-continue "
                    "(joined by +)",
         "burst": "burst needs a size: an integer from 1 to 100000, or nothing for the "
                  "spec's burst size",
         "record": "record needs on, off, nothing (to toggle) or a file path",
         "pace": "pace needs a scale: a positive number (2 doubles the pace, 0.5 halves it)"}
"""How to give each command's argument: the second half of a refusal's one line."""


class BadCommand(PeerError):
    """A command that is well formed but wrong (a peer's protocol error): answered with
    Ack(ok=False, message=str(this)) and the connection stays. `id` and `op` are echoed."""

    def __init__(self, message: str, id: int = 0, op: str = "?") -> None:
        super().__init__(message)
        self.id = id
        self.op = op


def make_command(op: str, arg: str | int | None = None, id: int = 0) -> Command:
    """The typed command for `op` and its one argument (the shape the TUI's keys and the
    tests speak). Raises BadCommand for an op that is not a command or an argument where the
    command takes none; the argument's type and value are checked where the command applies
    (the server), so a client of this version and a raw peer are refused alike."""
    cls = _BY_OP.get(op)
    if cls is None:
        raise BadCommand(f"unknown command {op!r}: use one of {', '.join(COMMAND_OPS)}", id, op)
    field = _ARG_FIELD.get(cls)
    if field is None:
        if arg is not None:
            raise BadCommand(f"{op} takes no argument, got {arg!r}", id, op)
        return cls(id=id)
    if field == "policy" and arg is None:
        raise BadCommand(USAGE["policy"], id, op)
    return cls(id=id, **{field: arg})


def command_arg(command: Command) -> str | int | None:
    """The one argument of `command` (None for those that take none): make_command's inverse."""
    field = _ARG_FIELD.get(type(command))
    return None if field is None else getattr(command, field)


# ---- server -> client -------------------------------------------------------------------

class Welcome(msgspec.Struct, tag="welcome", tag_field="kind", kw_only=True):
    protocol: int
    server: str  # observatory version of the engine process
    host: str
    pid: int  # the engine process
    source: str  # how this client's commands are labelled in the stream


class Refused(msgspec.Struct, tag="refused", tag_field="kind", kw_only=True):
    """The handshake failed; the server closes the connection after this line."""

    reason: str


class Closing(msgspec.Struct, tag="closing", tag_field="kind", kw_only=True):
    """The server ends this connection after this line (after the handshake)."""

    reason: str


class Ack(msgspec.Struct, tag="ack", tag_field="kind", kw_only=True):
    """One per Command, sent after the command's effect (e.g. PolicyChanged) is in the stream."""

    id: int
    op: str
    ok: bool
    message: str = ""
    step: int | None = None  # the step boundary it applied at (None: refused before reaching it)


class Progress(msgspec.Struct, tag="progress", tag_field="kind", kw_only=True):
    """Start-up stage before the run's first step: "importing vLLM", "building the engine",
    "adding N requests", "first step"."""

    stage: str
    detail: str = ""


class RecordingStatus(msgspec.Struct, tag="recording", tag_field="kind", kw_only=True):
    """Where the engine process records. path None: not recording. error: the recording
    stopped (full disk...); the run goes on. Sent when recording starts or stops, when an error
    appears, and about once a second while the file grows."""

    path: str | None
    bytes: int = 0
    records: int = 0
    error: str | None = None
    closed: str | None = None  # set once, when a recording closes: its path (bytes, records:
    # its final size)


class StateChanged(msgspec.Struct, tag="state", tag_field="kind", kw_only=True):
    """The run's state at `step` (engine.run_state: spelled "running", "paused"... on the
    wire)."""

    state: RunState
    step: int
    # A hold (engine.host.attention): why the engine paused itself ("first swapped group") and
    # the seconds it waits before going on by itself; any command ends it sooner.
    why: str = ""
    hold_s: float | None = None


class Policies(msgspec.Struct, tag="policies", tag_field="kind", kw_only=True):
    """The policies this engine cannot switch to, each with the one line a switch to it is
    refused with (engine.policy.refusals: a rule this vLLM has no way in for,
    or one this engine's settings rule out); a policy not named is taken. Sent once the engine
    is built, so that a picker can show them disabled before anyone asks."""

    refused: dict[str, str] = {}


class EngineInfo(msgspec.Struct, kw_only=True):
    """One engine behind an `observatory exec --serve` hub."""

    name: str  # host/pid/index
    address: str  # where it serves (127.0.0.1:PORT, reached through the hub)
    pid: int
    engine: str = ""  # "v0" or "v1"


class Engines(msgspec.Struct, tag="engines", tag_field="kind", kw_only=True):
    """The hub's answer to Hello(engine="?"): the engines it can reach, oldest first; the hub
    closes the connection after it."""

    engines: list[EngineInfo]


class Disconnected(msgspec.Struct, tag="disconnected", tag_field="kind", kw_only=True):
    """Client side only, never sent: the connection ended without RunFinished (the last item
    EngineLink.items() yields in that case)."""

    reason: str


ServiceMessage = Union[Welcome, Refused, Closing, Ack, Progress, RecordingStatus, StateChanged,
                       Policies]
ClientMessage = Union[Hello, SetPolicy, Pause, Resume, AddBurst, Stop, ToggleRecording, SetPace]
Incoming = Union[Header, Record, Welcome, Refused, Closing, Ack, Progress, RecordingStatus,
                 StateChanged, Policies, Engines]
"""Anything a server sends."""


class _Envelope(msgspec.Struct):
    """Just enough of a client line to refuse it by name: its kind and id, if it has them."""

    kind: str = "?"
    id: int | None = None


_encoder = msgspec.json.Encoder()
_client_decoder = msgspec.json.Decoder(ClientMessage)
_envelope_decoder = msgspec.json.Decoder(_Envelope)
_incoming_decoder = msgspec.json.Decoder(Incoming)


def encode_line(message: msgspec.Struct) -> bytes:
    """One message as a line, newline included."""
    return _encoder.encode(message) + b"\n"


def decode_client(line: bytes) -> Hello | Command:
    """Decode a client line into a Hello or a typed command. Raises BadCommand for a JSON
    object with a kind and id that is not a valid command (refuse it, keep the connection),
    and msgspec.DecodeError for anything else (not a protocol line: end the connection)."""
    try:
        return _client_decoder.decode(line)
    except msgspec.ValidationError as exc:
        try:
            envelope = _envelope_decoder.decode(line)
        except msgspec.DecodeError:
            raise exc from None
        if envelope.kind == "hello" or envelope.id is None:
            raise
        why = str(exc).splitlines()[0][:120]
        if envelope.kind not in _BY_OP:
            raise BadCommand(f"unknown command {envelope.kind!r}: use one of "
                             f"{', '.join(COMMAND_OPS)}", envelope.id, envelope.kind) from None
        hint = USAGE.get(envelope.kind)
        raise BadCommand(f"bad {envelope.kind} command ({why})" + (f": {hint}" if hint else ""),
                         envelope.id, envelope.kind) from None


def decode_incoming(line: bytes):
    """Decode a server line into a Header, a Record or a service message."""
    return _incoming_decoder.decode(line)
