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

import msgspec

from engine.stream.protocol import (MAX_LINE_BYTES, EngineInfo, Engines, Hello, Refused,
                                    decode_client, encode_line)

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
    def __init__(self, address: tuple[str, int], token: str | None, directory: str) -> None:
        self.token = token
        self.directory = directory
        self._listener = socket.create_server(address, reuse_port=False)
        self._closed = threading.Event()

    @property
    def address(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"{host}:{port}"

    def start(self) -> None:
        threading.Thread(target=self._accept, name="observatory-hub", daemon=True).start()

    def close(self) -> None:
        """Stop listening and remove the directory (the announcements, a generated token)."""
        self._closed.set()
        for call in (lambda: self._listener.shutdown(socket.SHUT_RDWR), self._listener.close):
            try:
                call()
            except OSError:
                pass
        import shutil

        shutil.rmtree(self.directory, ignore_errors=True)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True,
                             name="observatory-hub-conn").start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            sock.settimeout(HANDSHAKE_TIMEOUT_S)
            stream = sock.makefile("rb")
            line = stream.readline(MAX_LINE_BYTES + 1)
            try:
                hello = decode_client(line)
            except (ValueError, msgspec.DecodeError):
                return _refuse(sock, "not an observatory client: expected a hello line")
            if not isinstance(hello, Hello):
                return _refuse(sock, "send a hello line first")
            if self.token is not None and not hmac.compare_digest(hello.token.encode(),
                                                                  self.token.encode()):
                return _refuse(sock, "wrong token: use exec's --token-file")
            engines = read_engines(self.directory)
            if hello.engine == "?":
                sock.sendall(encode_line(Engines(engines=engines)))
                sock.close()
                return
            chosen = [e for e in engines if e.name == hello.engine] if hello.engine else engines
            if not chosen:
                names = ", ".join(e.name for e in engines) or "none yet"
                return _refuse(sock, (f"no engine {hello.engine!r} here (engines: {names})"
                                      if hello.engine else "no engine has started yet under "
                                      "this command: connect again once vLLM has built one"))
            target = chosen[-1]
            host, _, port = target.address.rpartition(":")
            upstream = socket.create_connection((host, int(port)), timeout=HANDSHAKE_TIMEOUT_S)
            upstream.settimeout(None)
            sock.settimeout(None)
            upstream.sendall(line)  # then whatever the client sent after it (read1 drains
            # the reader's buffer before it reads the socket again)
            threading.Thread(target=_pipe, args=(upstream, sock), daemon=True).start()
            _pipe_from(stream, upstream, sock)
        except OSError:
            try:
                sock.close()
            except OSError:
                pass


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (dst, src):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _pipe_from(stream, upstream: socket.socket, client: socket.socket) -> None:  # noqa: ANN001
    try:
        while True:
            data = stream.read1(65536)
            if not data:
                break
            upstream.sendall(data)
    except (OSError, ValueError):
        pass
    for s in (upstream, client):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _refuse(sock: socket.socket, reason: str) -> None:
    try:
        sock.sendall(encode_line(Refused(reason=reason)))
    except OSError:
        pass
    sock.close()
