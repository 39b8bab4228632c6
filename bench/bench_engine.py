"""Engine-side figures, measured in one run:

1. steps/s of the sim engine with the observatory attached (policy off, records built and handed
   to a sink) against the same engine and workload driven bare, as vLLM's own examples drive
   it. Repetitions are interleaved so machine noise hits both sides alike; the ratio of the
   medians is printed (target >= 0.97).
   Python's garbage collector dominates the noise: the seed's 10,000 requests put ~80,000
   sequences in the heap, a full collection takes 0.2-0.8 s, and when one lands moves a
   600-step run by +-30%. So the comparison is made twice: as is, and with the workload frozen
   out of the collector (gc.freeze() after the step that admitted it, in both arms alike).
2. The observatory's own cost per step, timed directly: the hook wrappers plus building the
   StepRecord, against the whole step.
3. `observatory run` (EngineHost: the session, its own gc.freeze once the requests are added,
   and a zstd recording, exactly what the command runs) against vLLM's own bare
   `LLMEngine.step()` loop with the GC as is, on the same workload: alternating pairs, ratio of
   the medians (target >= 1.1, from the GC freeze).
4. Wall time of `seed-5578` with policy off until vLLM aborts, and the step it aborts at.

Run: python bench/bench_engine.py [--steps N] [--reps R] [--only run]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.adapters.v0.build import build_engine  # noqa: E402
from engine.host import EngineHost  # noqa: E402
from engine.stream.records import EngineAborted, StepRecord  # noqa: E402
from engine.session import Session  # noqa: E402
from engine.spec import preset_spec  # noqa: E402
from engine.workload import Workload  # noqa: E402


def _settle(freeze: bool) -> None:
    if freeze:
        gc.collect()
        gc.freeze()


def bare_engine(spec):
    """vLLM's engine for `spec` with the workload added and its first step run (outside any
    timing), driven by nothing of the observatory's: as vLLM's own examples drive it."""
    from vllm import SamplingParams

    built = build_engine(spec)
    engine = built.engine
    params = SamplingParams(n=spec.n, max_tokens=spec.max_tokens,
                            stop_token_ids=built.stop_token_ids)
    last = -1.0
    for request in Workload(spec, built.max_model_len).initial():
        last = max(request.arrival_s, last + 1e-6)
        engine.add_request(request.request_id, {"prompt_token_ids": request.prompt_token_ids},
                           params, arrival_time=last)
    engine.step()
    return engine


def bare_steps_per_s(spec, steps: int, freeze: bool = False,
                     cpu_us: list[float] | None = None) -> float:
    """The unobserved engine: build, add the workload, call step() in a loop. `cpu_us` gets
    the looping thread's CPU microseconds per step."""
    engine = bare_engine(spec)
    _settle(freeze)
    start, cpu_start = time.perf_counter(), time.thread_time()
    for _ in range(steps):
        engine.step()
    rate = steps / (time.perf_counter() - start)
    if cpu_us is not None:
        cpu_us.append(1e6 * (time.thread_time() - cpu_start) / steps)
    gc.unfreeze()
    return rate


def observed_steps_per_s(spec, steps: int, freeze: bool = False) -> float:
    """A Session: hook attached, a StepRecord built per step and handed to a sink. The
    session's own gc.freeze is off here: `freeze` decides, as for the bare arm."""
    session = Session(spec, freeze_gc=False)
    session.prepare()
    marks: dict[int, float] = {}
    records = []

    def sink(item) -> None:
        records.append(item)
        if isinstance(item, StepRecord) and item.step in (0, steps):
            if item.step == 0:
                _settle(freeze)
            marks[item.step] = time.perf_counter()

    session.subscribe(sink)
    session.run()
    gc.unfreeze()
    return steps / (marks[steps] - marks[0])


def run_steps_per_s(spec, steps: int, cpu_us: list[float]) -> float:
    """What `observatory run` runs: EngineHost, recording to a zstd file, GC frozen by the
    session once the requests are added. `cpu_us` gets the engine thread's CPU us per step."""
    marks: dict[int, tuple[float, float]] = {}

    def stamp(item) -> None:
        if type(item) is StepRecord and item.step in (0, steps):
            marks[item.step] = (time.perf_counter(), time.thread_time())

    with tempfile.TemporaryDirectory() as tmp:
        host = EngineHost(spec, f"{tmp}/run.jsonl.zst")
        host.subscribe(stamp)
        host.start()
        host.done.wait()
    cpu_us.append(1e6 * (marks[steps][1] - marks[0][1]) / steps)
    return steps / (marks[steps][0] - marks[0][0])


def observer_cost(spec, steps: int) -> tuple[float, float]:
    """(microseconds per step spent building records, microseconds per whole step)."""
    import engine.session as session_module

    spent = [0.0]
    real_build = session_module.build_step_record

    def timed_build(*args, **kwargs):
        start = time.perf_counter()
        try:
            return real_build(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start

    session_module.build_step_record = timed_build
    try:
        session = Session(spec)
        stamps: list[float] = []
        session.subscribe(lambda i: stamps.append(time.perf_counter())
                          if isinstance(i, StepRecord) else None)
        session.run()
    finally:
        session_module.build_step_record = real_build
    return 1e6 * spent[0] / len(stamps), 1e6 * (stamps[-1] - stamps[0]) / (len(stamps) - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600,
                        help="timed steps per repetition (seed-5578 aborts near 805)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--only", choices=("run",), help="print only the run-vs-bare figure")
    args = parser.parse_args()

    spec = preset_spec("seed-5578", policy="off", max_steps=args.steps + 1).validated()
    bare_steps_per_s(spec, 20)  # warm-up: imports, allocator, caches
    bare, run, bare_cpu, run_cpu = [], [], [], []
    for rep in range(args.reps):
        order = ((lambda: bare_steps_per_s(spec, args.steps, cpu_us=bare_cpu), bare),
                 (lambda: run_steps_per_s(spec, args.steps, run_cpu), run))
        for fn, out in (order if rep % 2 == 0 else order[::-1]):
            out.append(fn())
    print(f"observatory run vs vLLM's own loop, seed-5578, policy off, {args.steps} steps x "
          f"{args.reps} alternating pairs (load average {os.getloadavg()[0]:.1f})")
    print(f"  bare LLMEngine.step() loop, GC as is : median {statistics.median(bare):7.1f} "
          f"steps/s  {['%.1f' % x for x in bare]}")
    print(f"  observatory run (EngineHost)         : median {statistics.median(run):7.1f} "
          f"steps/s  {['%.1f' % x for x in run]}")
    print(f"  ratio run/bare                       : "
          f"{statistics.median(run) / statistics.median(bare):.3f}  (target >= 1.1)")
    print(f"  CPU per step (the looping thread)    : bare {statistics.median(bare_cpu):.0f} us, "
          f"run {statistics.median(run_cpu):.0f} us, ratio bare/run "
          f"{statistics.median(bare_cpu) / statistics.median(run_cpu):.3f} (steps/s on an idle "
          f"CPU; robust to other processes' load)")
    if args.only == "run":
        return
    for freeze in (False, True):
        bare, observed = [], []
        for rep in range(args.reps):
            # Alternate which side goes first so drift over the run cancels.
            order = ((bare_steps_per_s, bare), (observed_steps_per_s, observed))
            for fn, out in (order if rep % 2 == 0 else order[::-1]):
                out.append(fn(spec, args.steps, freeze))
        ratio = statistics.median(observed) / statistics.median(bare)
        gc_note = "workload frozen out of the GC" if freeze else "GC as is"
        print(f"sim engine, seed-5578, policy off, {args.steps} steps x {args.reps} reps "
              f"(interleaved), {gc_note}")
        print(f"  bare vLLM engine      : median {statistics.median(bare):7.1f} steps/s  "
              f"{['%.1f' % x for x in bare]}")
        print(f"  observatory attached  : median {statistics.median(observed):7.1f} steps/s  "
              f"{['%.1f' % x for x in observed]}")
        print(f"  ratio observed/bare   : {ratio:.3f}  (target >= 0.97)")

    build_us, step_us = observer_cost(spec, args.steps)
    print(f"observer cost: {build_us:.0f} us per step building the StepRecord, of {step_us:.0f} us "
          f"per step in all: {build_us / step_us:.1%} (ratio bound {1 - build_us / step_us:.3f})")

    items = []
    session = Session(preset_spec("seed-5578", policy="off").validated())
    session.subscribe(items.append)
    start = time.perf_counter()
    session.run()
    wall = time.perf_counter() - start
    abort = next(i for i in items if isinstance(i, EngineAborted))
    print(f"seed-5578 with policy off: vLLM aborted at step {abort.step} after {wall:.1f} s wall "
          f"({abort.sim_s:.1f} s simulated), swapped {abort.swapped}, CPU KV "
          f"{abort.cpu_pct:.1f}%: {abort.message}")


if __name__ == "__main__":
    main()
