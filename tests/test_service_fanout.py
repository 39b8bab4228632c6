"""The fan-out never lets a client slow the engine: a client that stops reading is cut off once
its backlog passes the bound, with one log line, and the run goes on to its end."""

from __future__ import annotations

import socket

from engine.host import EngineHost
from engine.spec import preset_spec
from engine.stream.fanout import ClientQueue, Fanout
from engine.stream.protocol import decode_incoming
from engine.stream.records import RunFinished, StepRecord


def test_a_client_that_stops_reading_is_dropped_and_the_engine_goes_on():
    host = EngineHost(preset_spec("demo", policy="strict"), None)
    log: list[str] = []
    # The demo streams ~570 KB. A client that never reads passes 128 KiB early; one that reads
    # in a loop never falls that far (~250 steps) behind, even on a loaded 2-core machine.
    fanout = Fanout(host, max_backlog_bytes=128 * 1024, log=log.append)
    stuck, never_read = socket.socketpair()
    for sock in (stuck, never_read):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    reader, healthy = socket.socketpair()
    slow = ClientQueue(stuck, "slow")
    fast = ClientQueue(reader, "fast")
    fanout.attach(slow)
    fanout.attach(fast)
    received = bytearray()
    host.start()
    healthy.settimeout(120)
    while not received.endswith(b"\n") or b'"kind":"end"' not in received[-300:]:
        chunk = healthy.recv(1 << 20)
        if not chunk:
            break
        received += chunk
    assert host.done.wait(60)
    assert slow.cut is not None and "behind" in slow.cut
    assert [line for line in log if line.startswith("dropped client slow")] == \
        [f"dropped client slow: {slow.cut}"]
    assert fast.cut is None
    items = [decode_incoming(line) for line in bytes(received).splitlines()]
    assert isinstance(items[-1], RunFinished) and items[-1].reason == "completed"
    steps = [i.step for i in items if isinstance(i, StepRecord)]
    assert steps == list(range(items[-1].steps))  # the reading client got every step
    never_read.close()
    healthy.close()
