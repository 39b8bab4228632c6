"""How fast a long recording opens, as a user sees it: whole processes, on a terminal.

Prints, for one recording (make a long one with, e.g.,
`observatory run --preset demo --policy strict --requests 100000 --max-steps 100000 --record F`;
keep it out of git):

  1. `observatory summary F`: launch to exit (target <= 0.5 s);
  2. `observatory replay F` on a pty (120x40): launch to the first frame that shows the run's
     last step number (`/ N` in the replay bar; target <= 0.8 s);
  3. jumps on that screen, paused, in this order: `g 50000` Enter, Home and End, each from
     the key press to the frame that shows the new step (target <= 50 ms each).

Two arms run in alternating pairs (A B, B A, ...) so both see the same machine load: the file
as the recorder closed it, with its index (engine.stream.reader.indexed: `summary` reads the tail,
replay opens on a window), and the same file cut right before its index (every record kept:
the whole-file read every recording had before indexes). Each figure is the median of --reps
pairs; `summary` also gives the process's CPU time, which a machine shared with other busy
processes disturbs far less than wall time.

Without F, a 100,000-step recording is synthesized from a shipped run's records (renumbered
and shifted in time) and written by the real Recorder.

The processes run with their bytecode cached, as an installed observatory's are after its
first run: the modules compile once, into a cache of the bench's own (PYTHONPYCACHEPREFIX, even
where PYTHONDONTWRITEBYTECODE is set), in a warm-up launch of each arm that is not counted.
`--compile` compiles them at every launch instead (what a tree that never keeps bytecode pays:
~0.1 s of CPU more per launch).

    PYTHONPATH=. python bench/bench_replay.py [F] [--reps 5] [--compile]
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


PYCACHE: str | None = None  # main() sets it: where the measured processes keep bytecode


def env() -> dict[str, str]:
    out = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color",
           "COLUMNS": "120", "LINES": "40"}
    if PYCACHE is not None:
        out.pop("PYTHONDONTWRITEBYTECODE", None)
        out["PYTHONPYCACHEPREFIX"] = PYCACHE
    return out


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
        self.text = b""

    def wait_for(self, pattern: bytes, timeout: float = 60.0) -> float:
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
                self.text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", self.buffer)
                if regex.search(self.text):
                    return time.perf_counter() - t0
            if self.process.poll() is not None:
                break
        tail = self.text[-400:].decode(errors="replace")
        raise SystemExit(f"replay never showed {pattern!r}; its screen ended with: {tail!r}")

    def cpu_s(self) -> float:
        """CPU seconds the replay process has used so far (all its threads)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def ui_cpu_s(self) -> float:
        """CPU seconds of the replay's main (UI) thread so far, at nanosecond resolution: on a
        loaded machine a key's wall time is mostly waiting for a core, this is its work."""
        pid = self.process.pid
        return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[0]) / 1e9

    def press(self, keys: bytes, pattern: bytes) -> float:
        self.buffer = b""
        cpu = self.ui_cpu_s()
        os.write(self.master, keys)
        wall = self.wait_for(pattern)
        self.last_ui_cpu = self.ui_cpu_s() - cpu
        return wall

    def close(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        self.process.wait(30)
        os.close(self.master)


def bare_copy(path: Path, target: Path) -> bool:
    """`path` cut right before its index frame: every record kept, no index. False: it has
    no index to cut."""
    from engine.stream.reader import open_indexed

    indexed = open_indexed(path)
    if indexed is None:
        return False
    target.write_bytes(path.read_bytes()[:indexed.index.index_offset])
    return True


def synthesized(steps: int, target: Path) -> Path:
    from bench.bench_recording import synthesize
    from engine.stream.reader import load

    run = load(ROOT / "recordings" / "seed-5578-strict.jsonl.zst")
    synthesize(run.all_items(), steps, target)
    return target


def replay_once(path: Path, first: int, last: int, middle: int) -> dict[str, float]:
    screen = Screen(str(path))
    out: dict[str, float] = {}
    try:
        screen.wait_for(re.escape(f"/ {last:,}".encode()))
        out["open"] = time.perf_counter() - screen.started  # from launch
        out["open_cpu"] = screen.cpu_s()
        if b"paused" not in screen.text:
            screen.press(b" ", rb"paused")
        # each jump goes somewhere else (a jump to where the screen is draws nothing new: there
        # is nothing to time): an arm opens at the end (a window) or at the start (no index)
        screen.press(b"g", rb"step number")  # the prompt is up; typing is not the jump
        os.write(screen.master, str(middle).encode())
        time.sleep(0.5)  # a bench, not a test: let the digits land in the prompt
        out["g"] = screen.press(b"\r", re.escape(f"step {middle:,} /".encode()))
        out["g_cpu"] = screen.last_ui_cpu
        out["home"] = screen.press(KEYS["home"], re.escape(f"step {first:,} /".encode()))
        out["home_cpu"] = screen.last_ui_cpu
        out["end"] = screen.press(KEYS["end"], re.escape(f"step {last:,} /".encode()))
        out["end_cpu"] = screen.last_ui_cpu
    finally:
        screen.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100_000, help="when synthesizing")
    parser.add_argument("--compile", action="store_true",
                        help="no bytecode cache: every launch compiles the modules")
    args = parser.parse_args()
    import tempfile

    global PYCACHE

    from engine.stream.reader import load

    tmp = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    PYCACHE = None if args.compile else str(tmp / "pycache")
    indexed = Path(args.path) if args.path else synthesized(args.steps, tmp / "run.jsonl.zst")
    bare = tmp / "bare.jsonl.zst"
    if not bare_copy(indexed, bare):
        raise SystemExit(f"{indexed}: has no index (written before indexes, or cut): "
                         f"re-record it, or run without a path to synthesize one")
    recording = load(indexed)
    first, last = recording.first_step, recording.last_step
    middle = (first + last) // 2
    middle = int(round(middle, -3)) if last > 2000 else middle
    print(f"{indexed}: {len(recording):,} steps, {indexed.stat().st_size:,} bytes; load "
          f"average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    del recording
    arms = {"indexed": indexed, "no index": bare}
    sums: dict[str, list[tuple[float, float]]] = {a: [] for a in arms}
    shots: dict[str, list[dict[str, float]]] = {a: [] for a in arms}
    for arm in arms:  # warm-up, not counted: bytecode cache, the OS's file cache
        summary_s(str(arms[arm]))
        replay_once(arms[arm], first, last, middle)
    for i in range(args.reps):
        order = list(arms) if i % 2 == 0 else list(reversed(arms))
        for arm in order:
            sums[arm].append(summary_s(str(arms[arm])))
        for arm in order:
            shots[arm].append(replay_once(arms[arm], first, last, middle))
    med = statistics.median

    def verdict(value: float, target: float) -> str:
        return "met" if value <= target else "MISSED"

    print(f"medians of {args.reps} alternating pairs (load average now "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}; bytecode "
          f"{'compiled at every launch' if args.compile else 'cached'})")
    for arm in arms:
        wall, cpu = med(w for w, _ in sums[arm]), med(c for _, c in sums[arm])
        print(f"  summary, launch to exit, {arm:8}: {wall:.3f} s wall, {cpu:.3f} s CPU "
              f"(target <= 0.5 s: {verdict(wall, 0.5)} wall, {verdict(cpu, 0.5)} CPU)")
    for arm in arms:
        opened = med(s["open"] for s in shots[arm])
        cpu = med(s["open_cpu"] for s in shots[arm])
        print(f"  replay, launch to the last step on screen, {arm:8}: {opened:.3f} s wall, "
              f"{cpu:.2f} s CPU (target <= 0.8 s: {verdict(opened, 0.8)} wall, "
              f"{verdict(cpu, 0.8)} CPU)")
    for arm in arms:
        for key, name in (("g", f"g {middle}"), ("home", "Home"), ("end", "End")):
            times = [s[key] for s in shots[arm]]
            cpu = med(s[key + "_cpu"] for s in shots[arm])
            print(f"  replay jump {name:>7}, {arm:8}: median {med(times) * 1000:6.1f} ms, worst "
                  f"{max(times) * 1000:6.1f} ms wall; {cpu * 1000:5.1f} ms UI-thread CPU "
                  f"(target <= 50 ms: {verdict(med(times), 0.05)} wall, {verdict(cpu, 0.05)} "
                  f"CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
