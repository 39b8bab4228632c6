"""What the live screen says about itself: never `paused` while it follows a running engine,
and a connection that is refused ends the app with one line instead of a screen that waits
for nothing (a wrong token, a closed port, a peer that is not an observatory).

Pilot drives the app; every wait is on a condition (records arriving, the app exiting), never
a fixed sleep. The wrong token is tried on a real `observatory serve`.
"""

from __future__ import annotations

import socket
import threading

import pytest

from engine.spec import preset_spec
from engine.stream.client import connect
from engine.stream.records import StepRecord
from tui.launch import live_app
from tui.live.live_screen import LiveScreen
from tui.widgets.replay_bar import ReplayBar
from tui.widgets.status_bar import StatusBar

from test_service_remote import Serve
from test_tui_live import engine_pid, wait_for, wait_for_exit

SIZE = (80, 24)


def shown(screen: LiveScreen) -> str:
    """Both places a state word can appear: the status lines and the playback bar."""
    return (screen.query_one(StatusBar).render().plain + "\n"
            + screen.query_one(ReplayBar).render().plain)


async def test_following_a_running_engine_never_says_paused():
    spec = preset_spec("demo", policy="strict", requests=2000).validated()
    app = live_app(spec, None)
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        seen: list[str] = []

        def step_and_look(count: int) -> bool:
            seen.append(shown(screen))
            return len(screen.view.steps) > count

        await wait_for(pilot, lambda: step_and_look(0), "the first step")
        await wait_for(pilot, lambda: step_and_look(40), "forty steps")
        assert all("paused" not in text for text in seen), [t for t in seen if "paused" in t]
        assert "following" in screen.query_one(ReplayBar).render().plain
        assert "running" in screen.query_one(StatusBar).render().plain
        await pilot.press("space")  # the user pauses the engine: now it may say so
        await wait_for(pilot, lambda: screen.engine_state == "paused", "the engine to pause")
        await wait_for(pilot, lambda: "paused" in screen.query_one(StatusBar).render().plain,
                       "the status to say paused")
        pid = engine_pid(screen)
        await pilot.press("q")
    wait_for_exit(pid)


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    server = Serve(tmp_path_factory.mktemp("serve"))
    link = connect(server.address, server.token, client="warm-up")
    for item in link.items():  # past the engine's start-up: the serve answers at once now
        if isinstance(item, StepRecord):
            break
    link.close()
    yield server
    server.stop()


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"127.0.0.1:{port}"  # nothing listens there any more


class Peer:
    """A TCP peer on 127.0.0.1 that is not an observatory: it answers `reply` to anything
    (an HTTP server's refusal), or, with reply None, accepts and says nothing."""

    def __init__(self, reply: bytes | None) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.reply = reply
        self.connections: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        self.connections.append(conn)
        if self.reply is not None:
            conn.recv(4096)
            conn.sendall(self.reply)

    def close(self) -> None:
        self.server.close()
        for conn in self.connections:
            conn.close()
        self.thread.join(5)


async def refusal_of(address: str, token: str) -> str:
    """Open the live screen on `address`; the app must exit by itself, with one line. (How
    fast: bench/bench_connect_refusal.py; wall-clock figures stay out of tests.)"""
    app = live_app(None, connect=(address, token))
    async with app.run_test(size=SIZE) as pilot:
        screen: LiveScreen = app.main_screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: app.return_code is not None, "the app to exit")
    assert app.return_code == 2
    assert screen.refusal is not None and "\n" not in screen.refusal
    return screen.refusal


async def test_a_wrong_token_exits_with_one_line(serve):
    reason = await refusal_of(serve.address, "not-the-token")
    assert reason.startswith(f"{serve.address} refused the connection: wrong token"), reason


@pytest.mark.parametrize("kind", ["closed port", "http server", "silent peer"])
async def test_a_peer_that_is_not_an_observatory_exits_with_one_line(kind):
    peer = None
    if kind == "closed port":
        address = closed_port()
    else:
        peer = Peer(b"HTTP/1.0 400 Bad Request\r\n\r\n" if kind == "http server" else None)
        address = peer.address
    try:
        reason = await refusal_of(address, "any-token")
    finally:
        if peer is not None:
            peer.close()
    expected = {"closed port": "cannot connect to", "http server": "did not answer like an "
                "observatory engine", "silent peer": "did not answer within"}[kind]
    assert address in reason and expected in reason, reason
