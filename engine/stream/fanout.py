"""Fan the engine's lines out to any number of clients without ever making the engine wait.

The engine thread only appends bytes: to the history (so a late client gets the whole run) and
to each client's queue. One writer thread per client does the sending. A client whose queue
grows past `max_backlog_bytes` (it reads slower than the engine writes) is cut off on the spot:
the engine never blocks on a socket, and the server logs one line saying who and why.

A client attaching late first gets the current state (StateChanged, RecordingStatus, and
Progress while the engine is still starting), then the history (Header and every Record so far),
then the live tail. The state comes first because a finished run's history ends with RunFinished,
after which a client stops reading. History and registration are taken under one lock, so
nothing falls between the two and nothing arrives twice.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from typing import Callable

from engine.stream.protocol import encode_line

DEFAULT_MAX_BACKLOG_BYTES = 64 * 1024 * 1024
BATCH_S = 0.01
"""After a wake-up the writer waits this long so one send carries many records: at 1,000
steps/s that is ~100 sends (and GIL hand-offs to the writer) per second instead of ~2,000,
for at most 10 ms more latency."""
_HISTORY_CHUNK = 1 << 20
Log = Callable[[str], None]


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


class ClientQueue:
    """One attached client: its socket, its pending lines and its writer thread."""

    def __init__(self, sock: socket.socket, name: str) -> None:
        self.sock = sock
        self.name = name
        self.history: list[bytes] = []  # state and history: sent before anything in `live`
        self.live: deque[bytes] = deque()
        self.live_bytes = 0
        self.wake = threading.Event()
        self.closing = False  # send what is queued, then close
        self.cut: str | None = None  # dropped: why (nothing more is sent)
        self.writer: threading.Thread | None = None
        self.sent_all = threading.Event()  # closing and everything queued was sent


class Fanout:
    """History plus per-client queues, fed by EngineHost's line listener."""

    def __init__(self, host, *, max_backlog_bytes: int = DEFAULT_MAX_BACKLOG_BYTES,
                 log: Log | None = None, keep_history: bool = True) -> None:
        """`keep_history=False`: keep the history only until the first client attaches (a
        local child has exactly one client, so it need not hold the whole run in memory)."""
        self.host = host
        self.keep_history = keep_history
        self.max_backlog_bytes = max_backlog_bytes
        self.log = log or (lambda line: None)
        self.history: list[bytes] = []
        self._clients: list[ClientQueue] = []
        self._lock = threading.Lock()
        host.add_listener(self._on_line)

    @property
    def clients(self) -> list[ClientQueue]:
        with self._lock:
            return list(self._clients)

    # ---- the engine thread (and other publishers) --------------------------------------------
    def _on_line(self, line: bytes, recorded: bool) -> None:
        with self._lock:
            if recorded and (self.keep_history or not self._clients):
                self.history.append(line)
            for client in tuple(self._clients):  # a cut removes the client from the list
                self._push_locked(client, line)

    def _push_locked(self, client: ClientQueue, line: bytes) -> None:
        if client.cut is not None or client.closing:
            return  # a closing client's last line (a Closing) stays its last
        if client.live_bytes > self.max_backlog_bytes:
            self._cut_locked(client, f"it fell {_size(client.live_bytes)} behind the engine")
            return
        client.live.append(line)
        client.live_bytes += len(line)
        if not client.wake.is_set():
            client.wake.set()

    def _cut_locked(self, client: ClientQueue, why: str) -> None:
        client.cut = why
        client.live.clear()
        if client in self._clients:
            self._clients.remove(client)
        self.log(f"dropped client {client.name}: {why}")
        try:
            client.sock.shutdown(socket.SHUT_RDWR)  # unblocks its writer and its reader
        except OSError:
            pass
        client.wake.set()

    # ---- clients -------------------------------------------------------------------------
    def attach(self, client: ClientQueue) -> None:
        """Register `client` and start its writer: current state, history, then the tail."""
        host = self.host
        with self._lock:
            state = [host.last_state, host.last_recording]
            if not self.history and host.last_progress is not None:
                state.insert(0, host.last_progress)
            policies = getattr(host, "last_policies", None)  # an attached engine has none
            if policies is not None:
                state.append(policies)
            client.history = [encode_line(message) for message in state] + self.history
            if not self.keep_history:
                self.history = []
            self._clients.append(client)
        client.writer = threading.Thread(target=self._write, args=(client,), daemon=True,
                                         name=f"observatory-send-{client.name}")
        client.writer.start()

    def send(self, client: ClientQueue, line: bytes) -> None:
        """Queue a line for one client only (an Ack, a Closing)."""
        with self._lock:
            self._push_locked(client, line)

    def close_client(self, client: ClientQueue, last_line: bytes | None = None) -> None:
        """Send what is queued (and `last_line`), then close the connection."""
        with self._lock:
            if last_line is not None:
                self._push_locked(client, last_line)
            client.closing = True
            client.wake.set()

    def close_all(self, last_line: bytes | None, timeout: float) -> None:
        """Finish every client (see close_client) and wait up to `timeout` for the sends."""
        clients = self.clients
        for client in clients:
            self.close_client(client, last_line)
        for client in clients:
            if client.writer is not None:
                client.writer.join(timeout)

    def _write(self, client: ClientQueue) -> None:
        sock = client.sock
        try:
            history, client.history = client.history, []
            for start in range(0, len(history), 4096):
                if client.cut is not None:
                    return
                data = b"".join(history[start:start + 4096])
                for offset in range(0, len(data), _HISTORY_CHUNK):
                    sock.sendall(data[offset:offset + _HISTORY_CHUNK])
            del history
            while client.cut is None:
                client.wake.wait()
                if not client.closing:
                    time.sleep(BATCH_S)
                client.wake.clear()
                with self._lock:
                    batch = list(client.live)
                    client.live.clear()
                    client.live_bytes = 0
                    closing = client.closing
                if batch:
                    sock.sendall(b"".join(batch))
                if closing and not client.live:
                    break
        except OSError:
            pass  # the peer went away (or was cut): the reader side notices and detaches
        finally:
            with self._lock:
                if client in self._clients:
                    self._clients.remove(client)
            client.sent_all.set()
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
