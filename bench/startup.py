"""Start-up: from launching `observatory live` to its first step on screen, and where it goes.

The issue this answers (#37): the first step came after 5-6 s on V0 and 20-54 s on V1, with
"building the engine…" and no elapsed time. Targets on an idle machine: 5 s on V0, 8 s on V1;
twice that on the first run after install.

Two measures, each a fresh process as a user starts it:

- launch to first step: `observatory live --no-record` (the installed vLLM's default preset,
  live's default pace and hold) in a pseudo-terminal of 120x40, timed from the spawn to the
  first frame whose status line shows a step; then `q`. RUNS of them, the median with its range.
  `--cold` adds one run as the first after an install: no bytecode (an empty
  PYTHONPYCACHEPREFIX: Python compiles vLLM's and torch's sources, as after `uv pip install`
  without `--compile-bytecode`) and no vLLM caches (an empty VLLM_CACHE_ROOT: vLLM inspects
  the model's class in a subprocess and caches it there).
- where it goes: the engine's start-up stages (engine.session's progress: importing vLLM,
  building the engine, making the workload, adding the requests, the first step), headless
  in a fresh interpreter (`python -m engine.cli run --max-steps 1`'s code path, EngineHost),
  each stage's median over the same number of runs.

Bytecode is written (PYTHONDONTWRITEBYTECODE is dropped for the measured processes: a user's
Python writes it, and a run without it compiles vLLM again every time).

Run in the venv of the release to measure: python bench/startup.py [--runs N] [--cold]
[--tree DIR] [--against DIR] (V1: PYTHONHASHSEED=0, as bench/all.py gives it). `--tree`
measures another checkout of the observatory with this venv's vLLM; `--against` alternates
each run with one of another checkout (before and after a change: the ratio of the medians of
alternating pairs, which a loaded machine moves less than either time).
"""

from __future__ import annotations

import argparse
import os
import pty
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
import fcntl
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT  # the checkout measured (--tree)
TARGETS_S = {"v0": 5.0, "v1": 8.0}  # idle machine; the first run after install: twice that
SIZE = (40, 120)  # rows, columns
GUARD_S = 600.0  # a failure guard, not a target
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")
_STEP = re.compile(rb"running\s+step [0-9]")  # line 1 once a step has run (120 columns)
STAGES_CODE = r"""
import json, sys, time
t0 = time.perf_counter()
from engine.cli.run_flags import default_preset
from engine.host import EngineHost
from engine.spec import preset_spec
from engine.stream.protocol import Progress
from engine.stream.records import STEP_TYPES
marks = []
host = EngineHost(preset_spec(default_preset(), max_steps=1).validated(), None)
def sink(item):
    if type(item) is Progress:
        marks.append((item.stage, time.perf_counter() - t0))
    elif type(item) in STEP_TYPES and item.step == 0:
        marks.append(("shown", time.perf_counter() - t0))
        marks.append(("cpu", time.process_time()))
host.subscribe(sink)
host.start()
host.wait()
print(json.dumps(marks))
"""


def environment(cold: bool, scratch: Path | None, tree: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree or TREE), env.get("PYTHONPATH"))
                                        if p)
    env["TERM"] = env.get("TERM", "xterm-256color") if env.get("TERM") != "dumb" \
        else "xterm-256color"
    if cold and scratch is not None:
        env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
        env["VLLM_CACHE_ROOT"] = str(scratch / "vllm-cache")
    return env


def launch_to_first_step(env: dict[str, str]) -> float:
    """Seconds from spawning `observatory live --no-record` in a pty to the first frame that
    shows a step; the app is then quit with `q`."""
    argv = [sys.executable, "-m", "tui.cli", "live", "--no-record"]
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the app, on the pty
        os.chdir(env["PYTHONPATH"].split(os.pathsep)[0])  # the tree measured
        os.execve(sys.executable, argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[0], SIZE[1], 0, 0))
    seen = b""
    shown = None
    try:
        while time.perf_counter() - start < GUARD_S:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen = (seen + _ANSI.sub(b" ", chunk))[-4096:]
            if _STEP.search(seen):
                shown = time.perf_counter() - start
                break
        if shown is None:
            raise RuntimeError(f"no step on screen within {GUARD_S:.0f} s: "
                               f"{seen[-300:].decode(errors='replace')!r}")
        os.write(fd, b"q")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # drain the pty so that the app can exit
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    if not os.read(fd, 65536):
                        break
                except OSError:
                    break
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                pid = 0
                break
    finally:
        if pid:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
        os.close(fd)
    return shown


def stages(env: dict[str, str]) -> list[tuple[str, float]]:
    """The engine's start-up stages in a fresh interpreter: (stage, seconds at its start)."""
    import json

    done = subprocess.run([sys.executable, "-c", STAGES_CODE], cwd=str(TREE), env=env,
                          capture_output=True, text=True, timeout=GUARD_S, check=True)
    return [tuple(mark) for mark in json.loads(done.stdout.strip().splitlines()[-1])]


def durations(marks: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Each stage and how long it lasted (until the next began); the interpreter before it;
    and the process's CPU seconds to its first step ("cpu")."""
    cpu = [m for m in marks if m[0] == "cpu"]
    marks = [m for m in marks if m[0] != "cpu"]
    out = [("python and the observatory's imports", marks[0][1])] if marks else []
    for (stage, at), (_, end) in zip(marks, marks[1:]):
        name = stage.split(" (")[0]
        if out and out[-1][0] == name:  # the same stage said again, with its detail
            out[-1] = (name, out[-1][1] + end - at)
        else:
            out.append((name, end - at))
    return out + cpu


def engine_kind() -> tuple[str, str]:
    from engine.adapters.versions import installed_version, release_for

    version = installed_version()
    release = release_for(version)
    return (release.engine if release else "v0"), version or "none"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tree", type=Path, default=ROOT,
                        help="the observatory checkout to measure (default: this one)")
    parser.add_argument("--against", type=Path, default=None,
                        help="another checkout to alternate with (before a change)")
    parser.add_argument("--cold", action="store_true",
                        help="also one run as the first after an install (no bytecode, no "
                             "vLLM caches)")
    args = parser.parse_args()
    global TREE
    TREE = args.tree.resolve()
    kind, version = engine_kind()
    from engine.cli.run_flags import default_preset

    preset = default_preset()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="startup-") as scratch:
        warm = environment(False, None)
        other = environment(False, None, args.against.resolve()) if args.against else None
        launch_to_first_step(warm)  # writes the bytecode and vLLM's caches: not counted
        if other is not None:
            launch_to_first_step(other)
        runs, marks, before = [], [], []
        for _ in range(args.runs):  # alternating, so that load moves them alike
            runs.append(launch_to_first_step(warm))
            if other is not None:
                before.append(launch_to_first_step(other))
            marks.append(durations(stages(warm)))
        cold = launch_to_first_step(environment(True, Path(scratch))) if args.cold else None
    load1 = os.getloadavg()[0]
    target = TARGETS_S[kind]
    median = statistics.median(runs)
    print(f"startup {kind}, `observatory live --no-record` ({preset}, vLLM {version}), launch "
          f"to the first step on screen: median {median:.1f} s of {len(runs)} runs "
          f"({min(runs):.1f}-{max(runs):.1f}); target {target:g} s idle: "
          f"{'met' if median <= target else 'missed'} at load {load0:.1f}-{load1:.1f}")
    if before:
        ratios = [a / b for a, b in zip(runs, before)]
        print(f"startup {kind}, against {args.against}: its median {statistics.median(before):.1f} s"
              f" ({min(before):.1f}-{max(before):.1f}); this tree's over it, median of "
              f"{len(ratios)} alternating pairs: {statistics.median(ratios):.2f}")
    if cold is not None:
        print(f"startup {kind}, the first run after install (no bytecode, no vLLM caches): "
              f"{cold:.1f} s; target {2 * target:g} s idle: "
              f"{'met' if cold <= 2 * target else 'missed'}")
    names = [name for name, _ in marks[0]]
    medians = dict(zip(names, (statistics.median(run[i][1] for run in marks if len(run) > i)
                               for i in range(len(names)))))
    cpu = medians.pop("cpu", None)
    print(f"startup {kind}, engine stages headless (median of {len(marks)}): "
          + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in medians.items()))
    if cpu is not None:  # what the load does not inflate much: an idle machine's wall time
        print(f"startup {kind}, the headless engine's CPU time to its first step (median): "
              f"{cpu:.1f} s (target {target:g} s for the whole launch, idle)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
