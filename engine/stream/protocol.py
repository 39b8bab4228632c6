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
- After the handshake the client sends Command lines; each gets exactly one Ack with the same
  id. A command that changes the run shows in the stream too (PolicyChanged.source is
  "tui" for the local child's owner, "remote:<client>" for a TCP client).
- A connection the server ends on purpose gets Closing{reason} first (garbage from the client,
  engine start-up failure, server shutdown). A client that falls too far behind is cut off
  without one (the line could not reach it anyway); the server logs why.

Compatibility: add fields with defaults. Changing the meaning of a field or a message bumps
PROTOCOL_VERSION; a server refuses a client that speaks another version.
"""

from __future__ import annotations

from typing import Union

import msgspec

from engine.stream.records import Header, Record

PROTOCOL_VERSION = 1
COMMAND_OPS = ("policy", "pause", "resume", "burst", "stop", "record")
MAX_LINE_BYTES = 64 * 1024  # a client line longer than this is garbage
STATES = ("starting", "running", "paused", "stopping", "finished", "aborted", "stopped",
          "failed")


# ---- client -> server -------------------------------------------------------------------

class Hello(msgspec.Struct, tag="hello", tag_field="kind", kw_only=True):
    protocol: int
    token: str
    client: str  # a short name for this client; a TCP client's commands are "remote:<client>"


class Command(msgspec.Struct, tag="command", tag_field="kind", kw_only=True):
    """`op` in COMMAND_OPS. `arg`: policy: the policy ("strict", "watermark:0.5"); burst: the
    number of requests (None: the spec's burst_size); record: "on", "off", None (toggle), or,
    from the local owner only, a path to record to."""

    id: int
    op: str
    arg: str | int | None = None


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
    """The run's state (one of STATES) at `step`."""

    state: str
    step: int


class Disconnected(msgspec.Struct, tag="disconnected", tag_field="kind", kw_only=True):
    """Client side only, never sent: the connection ended without RunFinished (the last item
    EngineLink.items() yields in that case)."""

    reason: str


ServiceMessage = Union[Welcome, Refused, Closing, Ack, Progress, RecordingStatus, StateChanged]
ClientMessage = Union[Hello, Command]
Incoming = Union[Header, Record, Welcome, Refused, Closing, Ack, Progress, RecordingStatus,
                 StateChanged]
"""Anything a server sends."""

_encoder = msgspec.json.Encoder()
_client_decoder = msgspec.json.Decoder(ClientMessage)
_incoming_decoder = msgspec.json.Decoder(Incoming)


def encode_line(message: msgspec.Struct) -> bytes:
    """One message as a line, newline included."""
    return _encoder.encode(message) + b"\n"


def decode_client(line: bytes) -> Hello | Command:
    """Decode a client line; raises msgspec.DecodeError / ValidationError on anything else."""
    return _client_decoder.decode(line)


def decode_incoming(line: bytes):
    """Decode a server line into a Header, a Record or a service message."""
    return _incoming_decoder.decode(line)
