"""`observatory exec --serve HOST:PORT`'s hub: one address for every engine the command builds,
in whatever process builds it.

Each attached engine serves its own stream on 127.0.0.1 (engine.attached.registry.serve) and
writes `{name, address, pid, engine}` into the hub's directory. A client's Hello may name an
engine (`Hello.engine`, "host/pid/index"); "?" asks for the list (one Engines line, then the
hub closes); none means the newest engine. The hub checks the token, then splices the client
to that engine's server, which checks it again and serves the stream exactly as
`observatory serve` does. Switching engines is a new connection (`live --connect --engine`).
"""

from __future__ import annotations

import hmac
import json
import socket
import threading
from pathlib import Path
from typing import Callable

import msgspec

from engine.stream.listener import Listener, refuse
from engine.stream.protocol import (MAX_LINE_BYTES, EngineInfo, Engines, Hello, decode_client,
                                    encode_line)

HANDSHAKE_TIMEOUT_S = 5.0


def read_engines(directory: str) -> list[EngineInfo]:
    """The engines announced in `directory`, oldest first."""
    found: list[tuple[float, EngineInfo]] = []
    for path in Path(directory).glob("*.json"):
        try:
            entry = json.loads(path.read_text())
            found.append((path.stat().st_mtime, EngineInfo(
                name=str(entry["name"]), address=str(entry["address"]), pid=int(entry["pid"]),
                engine=str(entry.get("engine", "")))))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return [info for _, info in sorted(found, key=lambda pair: (pair[0], pair[1].name))]


class Hub:
    """The hub's listener (engine.stream.listener): each connection is checked, then spliced
    to the engine it asks for."""

    def __init__(self, address: tuple[str, int], token: str | None, directory: str) -> None:
        self.token = token
        self.directory = directory
        self._listener = Listener(address, self._serve, name="observatory-hub",
                                  thread_name=lambda _peer: "observatory-hub-conn")

    @property
    def address(self) -> str:
        return self._listener.address

    def start(self) -> None:
        self._listener.start()

    def close(self) -> None:
        """Stop listening and remove the directory (the announcements, a generated token)."""
        self._listener.close()
        import shutil

        shutil.rmtree(self.directory, ignore_errors=True)

    def _serve(self, sock: socket.socket, _peer: str) -> None:
        try:
            sock.settimeout(HANDSHAKE_TIMEOUT_S)
            stream = sock.makefile("rb")
            line = stream.readline(MAX_LINE_BYTES + 1)
            try:
                hello = decode_client(line)
            except (ValueError, msgspec.DecodeError):
                return refuse(sock, "not an observatory client: expected a hello line")
            if not isinstance(hello, Hello):
                return refuse(sock, "send a hello line first")
            if self.token is not None and not hmac.compare_digest(hello.token.encode(),
                                                                  self.token.encode()):
                return refuse(sock, "wrong token: use exec's --token-file")
            engines = read_engines(self.directory)
            if hello.engine == "?":
                sock.sendall(encode_line(Engines(engines=engines)))
                sock.close()
                return
            chosen = [e for e in engines if e.name == hello.engine] if hello.engine else engines
            if not chosen:
                names = ", ".join(e.name for e in engines) or "none yet"
                return refuse(sock, (f"no engine {hello.engine!r} here (engines: {names})"
                                      if hello.engine else "no engine has started yet under "
                                      "this command: connect again once vLLM has built one"))
            target = chosen[-1]
            host, _, port = target.address.rpartition(":")
            upstream = socket.create_connection((host, int(port)), timeout=HANDSHAKE_TIMEOUT_S)
            upstream.settimeout(None)
            sock.settimeout(None)
            upstream.sendall(line)  # then whatever the client sent after it (read1 drains
            # the reader's buffer before it reads the socket again)
            threading.Thread(target=_pump, args=(upstream.recv, sock, sock, upstream),
                             daemon=True).start()
            _pump(stream.read1, upstream, upstream, sock)
        except OSError:
            try:
                sock.close()
            except OSError:
                pass


def _pump(read: Callable[[int], bytes], dst: socket.socket, *ends: socket.socket) -> None:
    """Copy what `read` gives to `dst` until either side ends, then shut both `ends` down (so
    the other direction's pump ends too)."""
    try:
        while True:
            data = read(65536)
            if not data:
                break
            dst.sendall(data)
    except (OSError, ValueError):
        pass
    for s in ends:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
