"""The TCP listener skeleton both servers of the stream protocol share: `observatory serve`'s
Server (engine.stream.server) and `observatory exec --serve`'s hub (engine.attached.hub).

Each listens on one address, accepts on a daemon thread, serves every connection on a thread of
its own, and on close stops listening at once (shutdown wakes accept() on Linux). What a
connection is served is the caller's: this module only owns the socket and its threads, so the
two servers cannot drift apart on how they start, name their threads or stop. `refuse` is the
one line either sends a client it will not serve.
"""

from __future__ import annotations

import socket
import threading
from typing import Callable

from engine.stream.protocol import Refused, encode_line

Handler = Callable[[socket.socket, str], None]
"""(the accepted socket, its peer as "host:port"): serves it on the connection's thread."""


class Listener:
    """Listen on `address`; `start` accepts on a thread named `name`, each connection handed to
    `handle` on a thread named `thread_name(peer)`."""

    def __init__(self, address: tuple[str, int], handle: Handler, *, name: str,
                 thread_name: Callable[[str], str]) -> None:
        self._handle = handle
        self._name = name
        self._thread_name = thread_name
        self._socket = socket.create_server(address, reuse_port=False)
        self._closed = threading.Event()

    @property
    def address(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"{host}:{port}"

    def start(self) -> None:
        threading.Thread(target=self._accept, name=self._name, daemon=True).start()

    def close(self) -> None:
        """Stop accepting; connections already served go on until their handler returns."""
        self._closed.set()
        for call in (lambda: self._socket.shutdown(socket.SHUT_RDWR), self._socket.close):
            try:
                call()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                sock, addr = self._socket.accept()
            except OSError:
                return
            peer = f"{addr[0]}:{addr[1]}"
            threading.Thread(target=self._handle, args=(sock, peer), daemon=True,
                             name=self._thread_name(peer)).start()


def refuse(sock: socket.socket, reason: str) -> None:
    """Say why in one Refused line (if the client still listens), then close."""
    try:
        sock.sendall(encode_line(Refused(reason=reason)))
    except OSError:
        pass
    sock.close()
