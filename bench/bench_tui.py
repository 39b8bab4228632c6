"""What the UI costs and how fast it answers, now that the engine runs in its own process
(issue #7's targets), in one run:

1. Engine steps/s with the live TUI attached (a headless app at 160x50 on a local engine child)
   against `observatory run` headless on the same spec. Target: >= 0.97, the median of
   alternating pairs. Both rates come from the records' own wall-clock times, so start-up does
   not count.
2. Redraw rate while the engine runs flat out: frames the live screen painted (every widget)
   and plot rebuilds, per second of run. Target: >= 10 Hz.
3. Keypress to acknowledgement: `f` to the status showing the new policy as pending (the UI's
   own answer), and to the engine's PolicyChanged arriving (confirmed). Target: <= 100 ms median
   for the first.
4. `q`: a real `observatory live` in tmux, from the key to the UI process being gone, and to
   the engine child being gone with its recording closed. Target: <= 1 s for the UI.
5. Replay of a 100,000-step recording: first full frame (file read included; target <= 0.5 s),
   and seeks (target: median <= 20 ms, worst <= 50 ms).
6. `--follow` of a recording written at 2,000 steps/s: how far behind the screen is at the end.

This machine is shared and noisy: read the medians, and the spread next to them.

Usage: PYTHONPATH=. python bench/bench_tui.py [--pairs 5] [--max-steps 600] [--skip-quit]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import msgspec

from engine.spec import preset_spec
from engine.stream.reader import load
from engine.analysis.summary import SummaryBuilder
from engine.stream.recorder import Recorder
from engine.stream.records import Header, RunFinished, StepRecord

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE = (160, 50)


def steps_per_s(steps: list[StepRecord], skip: int = 20) -> float:
    """Steady-state rate: skip the first steps (engine warm-up) and use recorded wall times."""
    steps = steps[skip:]
    if len(steps) < 2 or steps[-1].wall_s <= steps[0].wall_s:
        return float("nan")
    return (steps[-1].step - steps[0].step) / (steps[-1].wall_s - steps[0].wall_s)


def run_headless(args: argparse.Namespace, tmp: str) -> float:
    path = os.path.join(tmp, "headless.jsonl")
    subprocess.run([sys.executable, "-m", "tui.cli", "run", "--preset", args.preset,
                    "--policy", args.policy, "--max-steps", str(args.max_steps),
                    "--record", path], cwd=ROOT, check=False, capture_output=True)
    return steps_per_s(load(path).steps)


async def run_live(args: argparse.Namespace, tmp: str) -> dict[str, float]:
    """One live run: its steps/s, frames and plot builds per second, and `f` latencies."""
    from textual import events

    from tui.launch import live_app
    from tui.widgets.run_plot import RunPlot
    from tui.widgets.status_bar import StatusBar

    builds = [0]
    original = RunPlot._build

    def counted(self):  # noqa: ANN001
        builds[0] += 1
        return original(self)

    RunPlot._build = counted  # type: ignore[method-assign]
    painted: list[float] = []  # when the status bar first rendered a pending policy
    original_render = StatusBar.render

    def render(self):  # noqa: ANN001
        text = original_render(self)
        if not painted and "→" in text.plain:
            painted.append(time.perf_counter())
        return text

    StatusBar.render = render  # type: ignore[method-assign]
    spec = preset_spec(args.preset, policy=args.policy, max_steps=args.max_steps).validated()
    app = live_app(spec, None)
    out: dict[str, float] = {}
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = app.main_screen
            while len(screen.view.steps) < 20:
                await pilot.pause(0.01)
            frames0, builds0, t0 = screen.frames, builds[0], time.perf_counter()
            pressed = None
            while screen.view.finished is None:
                await pilot.pause(0.01)
                n = len(screen.view.steps)
                if pressed is None and n > args.max_steps // 2:
                    # The key goes in as the terminal driver delivers it; pilot.press would
                    # also wait for the whole app to go idle, which a busy live screen never
                    # is for long. The clock stops when the status bar renders the pending
                    # policy (the arrow), and again when the engine's PolicyChanged arrives.
                    key = events.Key("f", "f")
                    key.set_sender(app)
                    painted.clear()
                    pressed = time.perf_counter()
                    app._driver.send_message(key)
                    while not screen.view.policy_changes:
                        await asyncio.sleep(0.001)
                    confirmed = time.perf_counter()
                    out["key_to_confirmed_ms"] = (confirmed - pressed) * 1000
                    # a pending state the engine confirmed before any frame drew it counts
                    # as shown at the confirmation
                    shown = min(painted[0], confirmed) if painted else confirmed
                    out["key_to_pending_ms"] = (shown - pressed) * 1000
            elapsed = time.perf_counter() - t0
            out["frames_hz"] = (screen.frames - frames0) / elapsed
            out["plot_builds_hz"] = (builds[0] - builds0) / elapsed / 3  # per plot
            out["steps_per_s"] = steps_per_s(screen.view.steps)
            await pilot.press("q")
    finally:
        RunPlot._build = original  # type: ignore[method-assign]
        StatusBar.render = original_render  # type: ignore[method-assign]
    return out


def quit_times(args: argparse.Namespace, tmp: str, runs: int) -> list[tuple[float, float]]:
    """(UI gone, engine child gone) seconds after `q`, for real processes in tmux."""
    if shutil.which("tmux") is None:
        return []
    results = []
    for i in range(runs):
        sock = f"bench-{os.getpid()}-{i}"  # a fresh server each time: kill-server is async
        record = os.path.join(tmp, f"quit{i}.jsonl")
        cmd = (f"cd {ROOT} && exec {sys.executable} -m tui.cli live --preset demo --policy "
               f"strict --requests 4000 --record {record}")
        started = subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "q", "-x",
                                  "160", "-y", "48", cmd], capture_output=True, text=True)
        if started.returncode != 0:
            print(f"   quit run {i}: tmux could not start ({started.stderr.strip()}); skipped")
            continue
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                pane = subprocess.run(["tmux", "-L", sock, "capture-pane", "-pt", "q"],
                                      capture_output=True, text=True).stdout
                if "running  step" in pane:
                    break
                time.sleep(0.2)
            time.sleep(1.0)
            ui = int(subprocess.run(["tmux", "-L", sock, "display", "-pt", "q",
                                     "#{pane_pid}"], capture_output=True, text=True)
                     .stdout.strip())
            child = subprocess.run(["pgrep", "-P", str(ui), "-f", "engine.child"],
                                   capture_output=True, text=True).stdout.split()
            t0 = time.perf_counter()
            subprocess.run(["tmux", "-L", sock, "send-keys", "-t", "q", "q"], check=True)
            ui_gone = _wait_gone(int(ui), t0)
            child_gone = _wait_gone(int(child[0]), t0) if child else float("nan")
            assert load(record).finished is not None, "recording not closed"
            results.append((ui_gone, child_gone))
        finally:
            subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
    return results


def _wait_gone(pid: int, t0: float) -> float:
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return time.perf_counter() - t0
        # a zombie counts as gone: the tmux server reaps it
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] == "Z":
                    return time.perf_counter() - t0
        except OSError:
            return time.perf_counter() - t0
        time.sleep(0.005)


def make_long_recording(path: str, steps: int) -> None:
    """A `steps`-step recording: a real demo run's steps repeated and renumbered."""
    from engine.session import Session

    items: list = []
    session = Session(preset_spec("demo", policy="strict").validated())
    session.subscribe(items.append)
    session.run()
    header = next(i for i in items if isinstance(i, Header))
    real = [i for i in items if isinstance(i, StepRecord)]
    recorder = Recorder(path, header, background_flush=False,
                        fold=SummaryBuilder)  # Check lines, as a run's
    wall = sim = 0.0
    for n in range(steps):
        s = real[n % len(real)]
        wall += 0.008
        sim += s.sim_step_s
        recorder.write(msgspec.structs.replace(s, step=n, wall_s=wall, sim_s=sim))
        if n % 250 == 249:
            recorder.flush()  # a flush every 250 steps: ~2 s of a live run
    recorder.write(RunFinished(steps=steps, reason="completed", sim_s=sim, wall_s=wall))
    recorder.close()


async def replay_figures(path: str, seeks: int) -> tuple[float, float, float]:
    from tui.launch import replay_app

    t0 = time.perf_counter()
    app = replay_app([path], autoplay=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        first_frame = time.perf_counter() - t0
        screen = app.main_screen
        last = screen.view.last_step
        rng = random.Random(0)
        times = []
        for _ in range(seeks):
            target = rng.randrange(0, last)
            t = time.perf_counter()
            screen.seek(target)  # paints every widget at once (plots: only the cursor moves)
            await pilot.pause()
            times.append(time.perf_counter() - t)
            assert screen.view.cursor == target
    return first_frame, statistics.median(times), max(times)


async def follow_lag(path: str, rate: float, seconds: float) -> tuple[int, int]:
    """Write `rate` steps/s to `path` for `seconds` while a follow replay reads it; return
    (steps written, steps the screen had when the writer stopped)."""
    from tui.launch import replay_app

    items = load(path)
    header, steps = items.header, items.steps
    target = os.path.join(os.path.dirname(path), "follow.jsonl")
    recorder = Recorder(target, header, background_flush=False, fold=SummaryBuilder)
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        """Writes as the engine's recorder does: a flush (and Check line) every 10 ms."""
        t0 = time.perf_counter()
        while not stop.is_set():
            due = int((time.perf_counter() - t0) * rate)
            for n in range(written[0], due):
                recorder.write(msgspec.structs.replace(steps[n % len(steps)], step=n))
            recorder.flush()
            written[0] = due
            time.sleep(0.01)

    app = replay_app([target], follow=True)
    async with app.run_test(size=SIZE) as pilot:
        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        await pilot.pause(seconds)
        stop.set()
        thread.join()
        shown = app.main_screen.view.last_step + 1
    recorder.close()
    return written[0], shown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="seed-5578")
    parser.add_argument("--policy", default="off")
    parser.add_argument("--max-steps", type=int, default=600)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--quits", type=int, default=5)
    parser.add_argument("--replay-steps", type=int, default=100_000)
    parser.add_argument("--seeks", type=int, default=20)
    parser.add_argument("--skip-quit", action="store_true")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-tui-")
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    ratios, live_runs = [], []
    for pair in range(args.pairs):
        order = ("headless", "live") if pair % 2 == 0 else ("live", "headless")
        got: dict[str, object] = {}
        for arm in order:
            got[arm] = run_headless(args, tmp) if arm == "headless" \
                else asyncio.run(run_live(args, tmp))
        live = got["live"]
        assert isinstance(live, dict)
        live_runs.append(live)
        ratio = live["steps_per_s"] / got["headless"]  # type: ignore[operator]
        ratios.append(ratio)
        print(f"pair {pair}: headless {got['headless']:.1f} steps/s, live "
              f"{live['steps_per_s']:.1f} steps/s, ratio {ratio:.3f}; frames "
              f"{live['frames_hz']:.1f}/s, plot builds {live['plot_builds_hz']:.1f}/s; f -> "
              f"pending {live.get('key_to_pending_ms', float('nan')):.0f} ms, confirmed "
              f"{live.get('key_to_confirmed_ms', float('nan')):.0f} ms")

    def med(key: str) -> float:
        return statistics.median(r[key] for r in live_runs if key in r)

    print(f"1. live/headless steps/s: median {statistics.median(ratios):.3f} over "
          f"{len(ratios)} alternating pairs (min {min(ratios):.3f}, max {max(ratios):.3f}); "
          f"target >= 0.97")
    print(f"2. redraw while running flat out: {med('frames_hz'):.1f} frames/s, "
          f"{med('plot_builds_hz'):.1f} plot builds/s per plot (medians); target >= 10")
    print(f"3. f -> pending on screen: median {med('key_to_pending_ms'):.0f} ms (target <= 100);"
          f" -> confirmed by the engine: median {med('key_to_confirmed_ms'):.0f} ms")
    if not args.skip_quit:
        quits = quit_times(args, tmp, args.quits)
        if quits:
            ui = [q[0] for q in quits]
            child = [q[1] for q in quits]
            print(f"4. q -> UI process gone: median {statistics.median(ui):.2f} s (max "
                  f"{max(ui):.2f}); engine child gone, recording closed: median "
                  f"{statistics.median(child):.2f} s; target <= 1 s for the UI")
    path = os.path.join(tmp, "long.jsonl")
    make_long_recording(path, args.replay_steps)
    first, median, worst = asyncio.run(replay_figures(path, args.seeks))
    print(f"5. replay of {args.replay_steps:,} steps: first full frame {first:.2f} s (target "
          f"<= 0.5); seek median {median * 1000:.0f} ms, worst {worst * 1000:.0f} ms (targets "
          f"20 / 50)")
    written, shown = asyncio.run(follow_lag(path, 2000, 5.0))
    print(f"6. --follow at 2,000 steps/s for 5 s: {written:,} written, {shown:,} on screen when "
          f"the writer stopped ({written - shown:,} behind)")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
