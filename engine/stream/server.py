"""Serve one EngineHost to clients: the handshake, command intake, and the TCP listener.

One thread per connection reads it: first the Hello (protocol version, shared-secret token
compared with hmac.compare_digest, client name), then command lines, each decoded into its typed
command and handed to the host, whose Ack comes back on the same connection. A command that is
well formed but wrong (unknown kind, a field of the wrong type) is refused with one Ack line and
the connection stays. The Fanout (engine.stream.fanout) does the sending.

Anything a client sends that is not a protocol line (random bytes, a line over MAX_LINE_BYTES,
a Hello after the handshake) gets one line back, Refused before the handshake or Closing after
it, and the connection is closed. The engine never notices.

The same `serve_connection` serves the local child's socketpair (engine.child) with `token=None`
(the socketpair is private to the two processes) and the source label "tui".
"""

from __future__ import annotations

import hmac
import os
import re
import socket
from typing import Callable

import msgspec

from engine import __version__
from engine.stream.fanout import DEFAULT_MAX_BACKLOG_BYTES, ClientQueue, Fanout, Log
from engine.stream.listener import Listener, refuse
from engine.stream.protocol import (MAX_LINE_BYTES, PROTOCOL_VERSION, Ack, BadCommand, Closing,
                                    Hello, Welcome, decode_client, encode_line)

HANDSHAKE_TIMEOUT_S = 5.0
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.@+-]")


def client_name(raw: str) -> str:
    """A client's self-chosen name, made safe for logs and `remote:<name>` sources."""
    return _NAME_CHARS.sub("_", raw)[:40] or "client"


def _read_line(stream) -> bytes | None:
    """One line without its newline; None at EOF. Raises ValueError for an overlong line."""
    line = stream.readline(MAX_LINE_BYTES + 1)
    if not line:
        return None
    if not line.endswith(b"\n"):
        if len(line) > MAX_LINE_BYTES:
            raise ValueError(f"a line longer than {MAX_LINE_BYTES:,} bytes")
        return None  # cut at EOF: the peer went away mid-line
    return line.rstrip(b"\r\n")


def serve_connection(sock: socket.socket, fanout: Fanout, *, token: str | None,
                     source: Callable[[str], str], peer: str, local: bool = False,
                     log: Log | None = None) -> None:
    """Handshake, attach, then take commands until the client leaves (then return). Runs on
    the calling thread (one per connection); never raises. `local`: the client is the engine
    process's owner, who may name recording paths."""
    log = log or fanout.log
    host = fanout.host
    try:
        sock.settimeout(HANDSHAKE_TIMEOUT_S)
        stream = sock.makefile("rb")
        try:
            line = _read_line(stream)
            hello = decode_client(line) if line is not None else None
        except socket.timeout:
            log(f"refused {peer}: no hello within {HANDSHAKE_TIMEOUT_S:g} s")
            return refuse(sock, f"no hello line within {HANDSHAKE_TIMEOUT_S:g} s")
        except (ValueError, msgspec.DecodeError) as exc:
            log(f"refused {peer}: not an observatory client")
            return refuse(sock, f"not an observatory client: expected a hello line "
                                 f"({str(exc).splitlines()[0][:120]})")
        if hello is None:
            sock.close()
            return
        if not isinstance(hello, Hello):
            log(f"refused {peer}: sent a command before hello")
            return refuse(sock, "send a hello line first")
        if hello.protocol != PROTOCOL_VERSION:
            log(f"refused {peer}: protocol {hello.protocol}")
            return refuse(sock, f"protocol version {hello.protocol} is not supported: this "
                                 f"engine speaks version {PROTOCOL_VERSION}; use the same "
                                 f"observatory version on both ends")
        if token is not None and not hmac.compare_digest(hello.token.encode(), token.encode()):
            log(f"refused {peer}: wrong token")
            return refuse(sock, "wrong token: use the token `observatory serve` printed "
                                 "(or its --token-file)")
        name = client_name(hello.client)
        label = source(name)
        sock.settimeout(None)
        sock.sendall(encode_line(Welcome(protocol=PROTOCOL_VERSION, server=__version__,
                                         host=socket.gethostname(), pid=os.getpid(),
                                         source=label)))
    except OSError:
        sock.close()
        return
    client = ClientQueue(sock, f"{name}@{peer}")
    fanout.attach(client)
    log(f"client {client.name} attached")
    _read_commands(stream, client, fanout, host, label, local, log)


def _read_commands(stream, client: ClientQueue, fanout: Fanout, host, label: str, local: bool,
                   log: Log) -> None:
    def reply(ack) -> None:
        fanout.send(client, encode_line(ack))

    try:
        while client.cut is None:
            try:
                line = _read_line(stream)
                if line is None:
                    break
                if not line.strip():
                    continue
                message = decode_client(line)
                if isinstance(message, Hello):
                    raise ValueError("a second hello")
            except BadCommand as bad:
                reply(Ack(id=bad.id, op=bad.op, ok=False, message=str(bad)))
                continue
            except (ValueError, msgspec.DecodeError) as exc:
                why = str(exc).splitlines()[0][:120]
                log(f"dropped client {client.name}: protocol error ({why})")
                fanout.close_client(client, encode_line(Closing(
                    reason=f"protocol error: {why}; expected one command line")))
                return
            host.submit(message, label, reply, allow_path=local)
    except OSError:
        pass
    log(f"client {client.name} left")
    fanout.close_client(client)


class Server:
    """Listen on a TCP address and serve every connection (see serve_connection)."""

    def __init__(self, host, address: tuple[str, int], token: str, *,
                 log: Log | None = None,
                 max_backlog_bytes: int = DEFAULT_MAX_BACKLOG_BYTES) -> None:
        self.fanout = Fanout(host, max_backlog_bytes=max_backlog_bytes, log=log)
        self.token = token
        self.log = self.fanout.log
        self._listener = Listener(address, self._serve, name="observatory-accept",
                                  thread_name=lambda peer: f"observatory-conn-{peer}")

    @property
    def address(self) -> str:
        return self._listener.address

    def start(self) -> None:
        self._listener.start()

    def _serve(self, sock: socket.socket, peer: str) -> None:
        # The writer already sends in batches; Nagle would hold a small batch (an Ack)
        # back until the client's delayed ACK, ~40 ms.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        serve_connection(sock, self.fanout, token=self.token, peer=peer,
                         source=lambda name: f"remote:{name}")

    def close(self, reason: str = "the server is shutting down", timeout: float = 1.0) -> None:
        self._listener.close()
        self.fanout.close_all(encode_line(Closing(reason=reason)), timeout)
