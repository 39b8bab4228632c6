"""How fast a long recording opens, as a user sees it: whole processes, on a terminal.

Prints, for one recording (make a long one with, e.g.,
`observatory run --preset demo --policy strict --requests 100000 --max-steps 100000 --record F`;
keep it out of git):

  1. `observatory summary F`: launch to exit (target <= 0.5 s);
  2. `observatory replay F` on a pty (120x40): launch to the first frame that shows the run's
     last step number (`/ N` in the replay bar; target <= 0.8 s);
  3. jumps on that screen, paused: End, Home and `g 50000` Enter, each from the key press to the
     frame that shows the new step (target <= 50 ms each).

Each figure is the median of --reps runs, with the process's CPU time beside the wall time: on
a machine shared with other busy processes wall time mostly measures the CPU scheduler, while
CPU time measures the work.

    PYTHONPATH=. python bench/bench_replay.py F [--reps 5]
"""

from __future__ import annotations

import argparse
import os
import pty
import re
import resource
import select
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KEYS = {"end": b"\x1b[F", "home": b"\x1b[H"}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def observatory(*args: str) -> list[str]:
    return [sys.executable, "-m", "tui.cli", *args]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color",
            "COLUMNS": "120", "LINES": "40"}


def summary_s(path: str) -> tuple[float, float]:
    cpu = children_cpu()
    started = time.perf_counter()
    done = subprocess.run(observatory("summary", path), env=env(), capture_output=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"summary failed: {done.stderr.decode().strip()}")
    return wall, children_cpu() - cpu


class Screen:
    """`observatory replay PATH` on a pty; `wait_for(pattern)` reads its output until a match."""

    def __init__(self, path: str) -> None:
        master, slave = pty.openpty()
        os.set_blocking(master, False)
        self.master = master
        self.started = time.perf_counter()
        self.process = subprocess.Popen(observatory("replay", path), env=env(), stdin=slave,
                                        stdout=slave, stderr=slave, close_fds=True,
                                        start_new_session=True)
        os.close(slave)
        self.buffer = b""

    def wait_for(self, pattern: bytes, timeout: float = 120.0) -> float:
        """Seconds until `pattern` appears in output written after this call."""
        self.buffer = b""
        t0 = time.perf_counter()
        regex = re.compile(pattern)
        while time.perf_counter() - t0 < timeout:
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(self.master, 1 << 16)
                except OSError:
                    break
                self.buffer += chunk
                # cursor moves split the text: match on the text with escapes removed
                if regex.search(re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", self.buffer)):
                    return time.perf_counter() - t0
            if self.process.poll() is not None:
                break
        raise SystemExit(f"replay never showed {pattern!r}")

    def press(self, keys: bytes, pattern: bytes) -> float:
        self.buffer = b""
        os.write(self.master, keys)
        return self.wait_for(pattern)

    def close(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        self.process.wait(30)
        os.close(self.master)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    from engine.stream.reader import load

    recording = load(args.path)
    first, last = recording.first_step, recording.last_step
    middle = (recording.first_step + last) // 2
    middle = int(round(middle, -3)) if last > 2000 else middle
    print(f"{args.path}: {len(recording):,} steps, {os.path.getsize(args.path):,} bytes; "
          f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    del recording

    sums = [summary_s(args.path) for _ in range(args.reps)]
    print(f"summary, launch to exit : median {statistics.median(w for w, _ in sums):.3f} s "
          f"wall, {statistics.median(c for _, c in sums):.3f} s CPU (target <= 0.5 s)")

    opened, jumps = [], {"end": [], "home": [], f"g {middle}": []}
    last_text = f"/ {last:,}".encode()
    for _ in range(args.reps):
        screen = Screen(args.path)
        try:
            screen.wait_for(re.escape(last_text))
            opened.append(time.perf_counter() - screen.started)  # from launch
            screen.press(b" ", rb"paused")
            jumps["end"].append(screen.press(KEYS["end"], re.escape(
                f"step {last:,} /".encode())))
            jumps["home"].append(screen.press(KEYS["home"], re.escape(
                f"step {first:,} /".encode())))
            screen.press(b"g", rb"step number")  # the prompt is up; typing is not the jump
            os.write(screen.master, str(middle).encode())
            time.sleep(0.5)  # a bench, not a test: let the digits land in the prompt
            jumps[f"g {middle}"].append(screen.press(b"\r", re.escape(
                f"step {middle:,} /".encode())))
        finally:
            screen.close()
    print(f"replay, launch to the last step on screen: median {statistics.median(opened):.3f} s "
          f"wall (target <= 0.8 s)")
    for name, times in jumps.items():
        print(f"replay jump {name:>9}: median {statistics.median(times) * 1000:6.1f} ms, worst "
              f"{max(times) * 1000:6.1f} ms (target <= 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
