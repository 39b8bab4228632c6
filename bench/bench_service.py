"""Engine service figures, over 127.0.0.1, measured in one run:

1. Remote command latency: a client attached to `observatory serve` sends `policy` and waits
   for the PolicyChanged in the stream and for its Ack. Median and worst of N sends
   (target: median <= 100 ms).
2. Engine steps/s with one client process attached (reading everything over 127.0.0.1)
   against none, as alternating pairs of in-process serves (EngineHost + Server, wired as
   `observatory serve` wires them; target >= 0.97). Also the engine thread's own CPU time per
   step: on a machine shared with other busy processes, wall-clock steps/s mostly measures the
   CPU scheduler (a thread that sleeps briefly, as one woken by a client's traffic does, gets
   a larger share), while CPU time per step measures the work.

Both use the seed-5578 workload with policy strict (it does not abort) unless told otherwise.
Run: python bench/bench_service.py [--sends 30] [--pairs 5] [--steps 600] [--preset seed-5578]
"""

from __future__ import annotations

import argparse
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.stream.client import connect  # noqa: E402
from engine.stream.protocol import Ack  # noqa: E402
from engine.stream.records import PolicyChanged, RunFinished, StepRecord  # noqa: E402


class Serve:
    """`python -m engine.cli serve` in a child process, stopped by PID."""

    def __init__(self, workdir: Path, preset: str, *extra: str) -> None:
        self.record = workdir / f"serve-{time.monotonic_ns()}.jsonl.zst"
        token_file = workdir / "token"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "engine.cli", "serve", "--preset", preset, "--policy",
             "strict", "--listen", "127.0.0.1:0", "--token-file", str(token_file), "--record",
             str(self.record), *extra],
            cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        self.address = None
        for line in self.process.stderr:
            if "listening on " in line:
                self.address = line.rsplit("listening on ", 1)[1].strip()
                break
        if self.address is None:
            raise SystemExit("serve did not start")
        threading.Thread(target=lambda: [None for _ in self.process.stderr], daemon=True).start()
        self.token = token_file.read_text().strip()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            self.process.wait(30)


def command_latency(workdir: Path, preset: str, sends: int) -> tuple[list[float], list[float]]:
    """(send -> PolicyChanged, send -> Ack) in milliseconds, one pair per send. A reader thread
    consumes the stream all along, as the TUI does, and stamps what arrives."""
    serve = Serve(workdir, preset)
    try:
        link = connect(serve.address, serve.token, client="bench")
        arrivals: queue.Queue = queue.Queue()
        stepping = threading.Event()

        def read() -> None:
            for item in link.items():
                if isinstance(item, StepRecord) and item.step >= 20:
                    stepping.set()
                elif isinstance(item, (PolicyChanged, Ack, RunFinished)):
                    arrivals.put((time.perf_counter(), item))

        threading.Thread(target=read, daemon=True).start()
        if not stepping.wait(300):
            raise SystemExit("the engine did not start stepping")
        to_change: list[float] = []
        to_ack: list[float] = []
        policies = ("watermark:0.5", "strict")
        for n in range(sends):
            time.sleep(0.05)
            sent_at = time.perf_counter()
            pending = link.send("policy", policies[n % 2])
            while True:
                at, item = arrivals.get(timeout=30)
                if isinstance(item, PolicyChanged) and item.source == "remote:bench":
                    to_change.append(1000 * (at - sent_at))
                elif isinstance(item, Ack) and item.id == pending:
                    to_ack.append(1000 * (at - sent_at))
                    break
                elif isinstance(item, RunFinished):
                    raise SystemExit("the run ended during the latency bench")
        link.send("stop")
        link.close()
    finally:
        serve.stop()
    return to_change, to_ack


READER = """
import sys
sys.path.insert(0, {root!r})
from engine.stream.client import connect
link = connect({address!r}, {token!r}, client="reader")
print("attached", flush=True)
count = sum(1 for _ in link.items())
link.close()
"""


def attached_run(preset: str, steps: int, attach: bool) -> tuple[float, float]:
    """(steps/s, engine-thread CPU microseconds per step) of one in-process serve (EngineHost
    plus Server, as `observatory serve` wires them), with or without a client process reading
    the whole stream over 127.0.0.1."""
    from engine.host import EngineHost
    from engine.spec import preset_spec
    from engine.stream.server import Server

    host = EngineHost(preset_spec(preset, policy="strict", max_steps=steps + 1), None)
    marks: dict[int, tuple[float, float]] = {}
    first, last = 20, steps

    def stamp(item) -> None:
        if type(item) is StepRecord and item.step in (first, last):
            marks[item.step] = (time.perf_counter(), time.thread_time())

    host.subscribe(stamp)
    server = Server(host, ("127.0.0.1", 0), "bench-token")
    server.start()
    reader = None
    if attach:
        reader = subprocess.Popen(
            [sys.executable, "-c", READER.format(root=str(ROOT), address=server.address,
                                                 token="bench-token")],
            stdout=subprocess.PIPE, text=True)
        reader.stdout.readline()  # attached before the engine starts
    try:
        host.start()
        host.done.wait(600)
    finally:
        server.close()
        if reader is not None:
            try:
                reader.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(reader.pid, signal.SIGKILL)
                reader.wait(10)
    wall = marks[last][0] - marks[first][0]
    cpu = marks[last][1] - marks[first][1]
    return (last - first) / wall, 1e6 * cpu / (last - first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=30)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--preset", default="seed-5578")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        to_change, to_ack = command_latency(workdir, args.preset, args.sends)
        print(f"remote policy command over 127.0.0.1, {args.preset}, {args.sends} sends:")
        print(f"  send -> PolicyChanged in the stream: median {statistics.median(to_change):6.1f} "
              f"ms, worst {max(to_change):6.1f} ms  (target: median <= 100 ms)")
        print(f"  send -> Ack                        : median {statistics.median(to_ack):6.1f} "
              f"ms, worst {max(to_ack):6.1f} ms")
        attached, alone, attached_cpu, alone_cpu = [], [], [], []
        attached_run(args.preset, 30, False)  # warm-up: imports vLLM in this process
        for pair in range(args.pairs):
            order = ((True, attached, attached_cpu), (False, alone, alone_cpu))
            for attach, out, cpu in (order if pair % 2 == 0 else order[::-1]):
                rate, us = attached_run(args.preset, args.steps, attach)
                out.append(rate)
                cpu.append(us)
        ratio = statistics.median(attached) / statistics.median(alone)
        print(f"engine steps/s, serve {args.preset} policy strict, {args.steps} steps, "
              f"{args.pairs} alternating pairs (load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} CPUs):")
        print(f"  one client attached : median {statistics.median(attached):7.1f} steps/s, "
              f"engine thread {statistics.median(attached_cpu):6.0f} us CPU/step  "
              f"{['%.1f' % x for x in attached]}")
        print(f"  no client           : median {statistics.median(alone):7.1f} steps/s, "
              f"engine thread {statistics.median(alone_cpu):6.0f} us CPU/step  "
              f"{['%.1f' % x for x in alone]}")
        print(f"  ratio attached/none : {ratio:.3f} steps/s (target >= 0.97); engine CPU per "
              f"step none/attached {statistics.median(alone_cpu) / statistics.median(attached_cpu):.3f}")

if __name__ == "__main__":
    main()
