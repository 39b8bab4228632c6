"""How much the TUI costs, in one run (issue #4's benchmark).

1. Live: steps/s of a sim session with the TUI attached (a headless app at 160x50) against the
   same session without it. Target: ratio >= 0.9. Steps/s is measured the same way for both,
   from the records' own wall-clock times, so engine start-up does not count. Runs alternate
   (bare, TUI, bare, TUI, ...) and the median of the pairs' ratios is reported, because on a
   shared machine one pair alone varies by +-30%.
   Also reported, because it does not depend on what else the machine runs: the same ratio in
   GIL time. The engine and the UI share one GIL, so a step costs the engine thread's CPU time
   plus whatever CPU time the UI (main) thread spent meanwhile; both clocks are read on the
   engine thread at every step (time.pthread_getcpuclockid).
   Garbage collection dominates the noise: with the seed's 10,000 requests (80,000 sequences)
   in the heap a full collection takes 0.2-0.8 s, and whichever thread's allocations trip the
   threshold pays for it. The UI's allocations make full collections come sooner. So the pairs
   are run twice: as the engine is today, and with the workload frozen out of the collector
   (gc.freeze() on the engine thread right after step 0 added the requests, in both runs of a
   pair), which is what the engine could do to make every run faster.
2. Replay: time from building the replay app for a 100,000-step recording (reading it
   included) to its first full frame.
3. Seek: time for a seek to an arbitrary step to be drawn, averaged.

Usage: PYTHONPATH=. python bench/bench_tui.py [--preset seed-5578] [--policy off]
       [--max-steps 800] [--replay-steps 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import statistics
import sys
import tempfile
import threading
import time

import msgspec

from engine.stream.records import Header, StepRecord, encode
from engine.session import Session
from engine.spec import preset_spec


def steps_per_s(steps: list[StepRecord], skip: int = 20) -> float:
    """Steady-state rate: skip the first steps (engine warm-up) and use recorded wall times."""
    steps = steps[skip:]
    if len(steps) < 2 or steps[-1].wall_s <= steps[0].wall_s:
        return float("nan")
    return (steps[-1].step - steps[0].step) / (steps[-1].wall_s - steps[0].wall_s)


class CpuMarks:
    """A session sink that notes, at every step, the CPU time of the engine thread (it runs
    there) and of the main thread (the UI's, in a TUI run)."""

    def __init__(self) -> None:
        self.main_clock = time.pthread_getcpuclockid(threading.main_thread().ident)
        self.marks: list[tuple[int, float, float]] = []

    def __call__(self, item) -> None:
        if type(item) is StepRecord:
            self.marks.append((item.step, time.thread_time(),
                               time.clock_gettime(self.main_clock)))

    def gil_steps_per_s(self, skip: int = 20) -> float:
        """Steps per second of GIL time (engine CPU + UI CPU), warm-up skipped."""
        marks = self.marks[skip:]
        if len(marks) < 2:
            return float("nan")
        (s0, e0, m0), (s1, e1, m1) = marks[0], marks[-1]
        return (s1 - s0) / ((e1 - e0) + (m1 - m0))

    def main_share(self, skip: int = 20) -> float:
        """The main (UI) thread's share of the GIL time over the measured steps."""
        marks = self.marks[skip:]
        if len(marks) < 2:
            return float("nan")
        (_, e0, m0), (_, e1, m1) = marks[0], marks[-1]
        return (m1 - m0) / ((e1 - e0) + (m1 - m0))


class FreezeAfterFirstStep:
    """A sink that takes everything alive after step 0 (the initial workload) out of the
    cyclic garbage collector, once. Emulates a possible engine-side change."""

    def __init__(self) -> None:
        self.done = False

    def __call__(self, item) -> None:
        if not self.done and type(item) is StepRecord:
            self.done = True
            gc.freeze()


def run_bare(spec, cpu: CpuMarks | None = None, freeze: bool = False) -> list[StepRecord]:
    items: list = []
    session = Session(spec)
    session.subscribe(items.append)
    if cpu is not None:
        session.subscribe(cpu)
    if freeze:
        session.subscribe(FreezeAfterFirstStep())
    session.prepare()
    session.start()
    session.join()
    return [i for i in items if isinstance(i, StepRecord)]


async def run_with_tui(spec, cpu: CpuMarks | None = None,
                       freeze: bool = False) -> list[StepRecord]:
    from tui.launch import live_app

    def factory(spec):
        session = Session(spec)
        if cpu is not None:
            session.subscribe(cpu)
        if freeze:
            session.subscribe(FreezeAfterFirstStep())
        return session

    app = live_app(spec, None, session_factory=factory)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.main_screen
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            if screen.session is not None and screen.session.state in (
                    "aborted", "finished", "stopped") and not screen._buffer:
                break
        await pilot.pause()
        steps = list(screen.view.steps)
        screen.shutdown()
    return steps


def make_long_recording(path: str, steps: int) -> None:
    """A `steps`-step recording: a real demo run's steps repeated and renumbered."""
    items: list = []
    session = Session(preset_spec("demo", policy="strict").validated())
    session.subscribe(items.append)
    session.run()
    header = next(i for i in items if isinstance(i, Header))
    real = [i for i in items if isinstance(i, StepRecord)]
    with open(path, "wb") as f:
        f.write(encode(header) + b"\n")
        wall = sim = 0.0
        for n in range(steps):
            s = real[n % len(real)]
            wall += 0.008
            sim += s.sim_step_s
            f.write(encode(msgspec.structs.replace(s, step=n, wall_s=wall, sim_s=sim)) + b"\n")
        from engine.stream.records import RunFinished

        f.write(encode(RunFinished(steps=steps, reason="completed", sim_s=sim, wall_s=wall))
                + b"\n")


async def replay_figures(path: str, seeks: int) -> tuple[float, float, float]:
    from tui.launch import replay_app
    from tui.run_plot import RunPlot

    t0 = time.perf_counter()
    app = replay_app([path], autoplay=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        first_frame = time.perf_counter() - t0
        screen = app.main_screen
        last = screen.view.last_step
        rng = random.Random(0)
        times = []
        for _ in range(seeks):
            target = rng.randrange(0, last)
            t = time.perf_counter()
            screen.seek(target)
            for plot in screen.query(RunPlot):
                plot.render()  # what the next frame would do; forced so it is measured
            await pilot.pause()
            times.append(time.perf_counter() - t)
            assert screen.view.cursor == target
    return first_frame, statistics.median(times), max(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="seed-5578")
    parser.add_argument("--policy", default="off")
    parser.add_argument("--max-steps", type=int, default=800)
    parser.add_argument("--replay-steps", type=int, default=100_000)
    parser.add_argument("--seeks", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=3, help="bare/TUI run pairs (median)")
    args = parser.parse_args()

    spec = preset_spec(args.preset, policy=args.policy, max_steps=args.max_steps).validated()
    run_bare(preset_spec("demo", max_steps=5).validated())  # import torch/vLLM outside timing
    # Both kinds of run start from the same frozen heap (torch and vLLM imported), so that the
    # live screen's own gc.freeze() at mount only takes the UI's objects out of the GC's scans,
    # as it does in a real `observatory live`, where vLLM is imported after the screen mounts.
    gc.collect()
    gc.freeze()
    for freeze in (False, True):
        label = "workload frozen out of the GC" if freeze else "engine as it is"
        ratios, gil_ratios = [], []
        for pair in range(args.pairs):
            bare_cpu, tui_cpu = CpuMarks(), CpuMarks()
            bare = run_bare(spec, bare_cpu, freeze)
            gc.unfreeze()  # back to the common starting heap
            gc.collect()
            gc.freeze()
            tui = asyncio.run(run_with_tui(spec, tui_cpu, freeze))
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            bare_rate, tui_rate = steps_per_s(bare), steps_per_s(tui)
            ratios.append(tui_rate / bare_rate)
            gil_ratios.append(tui_cpu.gil_steps_per_s() / bare_cpu.gil_steps_per_s())
            print(f"live {args.preset}/{args.policy}, {label}, pair {pair + 1}: {len(bare)} steps "
                  f"without TUI at {bare_rate:,.1f} steps/s; {len(tui)} steps with the TUI at "
                  f"{tui_rate:,.1f} steps/s; ratio {ratios[-1]:.3f}; in GIL time "
                  f"{bare_cpu.gil_steps_per_s():,.1f} vs {tui_cpu.gil_steps_per_s():,.1f} "
                  f"steps/s, ratio {gil_ratios[-1]:.3f}; UI thread share of GIL time "
                  f"{tui_cpu.main_share():.1%}", flush=True)
        print(f"live ratio, {label} (median of {len(ratios)} pairs): wall clock "
              f"{statistics.median(ratios):.3f}, GIL time {statistics.median(gil_ratios):.3f} "
              f"(target >= 0.9)", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "long.jsonl")
        t = time.perf_counter()
        make_long_recording(path, args.replay_steps)
        size = os.path.getsize(path)
        print(f"made a {args.replay_steps:,}-step recording ({size / 1e6:.1f} MB) in "
              f"{time.perf_counter() - t:.1f} s")
        first, seek_median, seek_max = asyncio.run(replay_figures(path, args.seeks))
    print(f"replay {args.replay_steps:,} steps: first full frame after {first:.2f} s "
          f"(reading the file included)")
    print(f"seek to an arbitrary step: median {seek_median * 1000:.0f} ms, "
          f"max {seek_max * 1000:.0f} ms over {args.seeks} seeks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
