"""Engine-side figures, measured in one run:

1. steps/s of the sim engine with the observatory attached (policy off, records built and handed
   to a sink) against the same engine and workload driven bare, as vLLM's own examples drive
   it. Repetitions are interleaved so machine noise hits both sides alike; the ratio of the
   medians is printed (target >= 0.97).
2. Wall time of `seed-5578` with policy off until vLLM aborts, and the step it aborts at.

Run: python bench/bench_engine.py [--steps N] [--reps R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.backends import build_engine  # noqa: E402
from engine.records import EngineAborted  # noqa: E402
from engine.session import Session  # noqa: E402
from engine.spec import preset_spec  # noqa: E402
from engine.workload import Workload  # noqa: E402


def bare_steps_per_s(spec, steps: int) -> float:
    """The unobserved engine: build, add the workload, call step() in a loop."""
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
    engine.step()  # first step outside the timing on both sides
    start = time.perf_counter()
    for _ in range(steps):
        engine.step()
    return steps / (time.perf_counter() - start)


def observed_steps_per_s(spec, steps: int) -> float:
    """A Session: hook attached, a StepRecord built per step and handed to a sink."""
    session = Session(spec)
    session.prepare()
    marks: dict[int, float] = {}
    records = []

    def sink(item) -> None:
        records.append(item)
        step = getattr(item, "step", None)
        if step in (0, steps) and type(item).__name__ == "StepRecord":
            marks[step] = time.perf_counter()

    session.subscribe(sink)
    session.run()
    return steps / (marks[steps] - marks[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600,
                        help="timed steps per repetition (seed-5578 aborts near 805)")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()

    spec = preset_spec("seed-5578", policy="off", max_steps=args.steps + 1).validated()
    bare, observed = [], []
    bare_steps_per_s(spec, 20)  # warm-up: imports, allocator, caches
    for rep in range(args.reps):
        # Alternate which side goes first so drift over the run cancels.
        order = ((bare_steps_per_s, bare), (observed_steps_per_s, observed))
        for fn, out in (order if rep % 2 == 0 else order[::-1]):
            out.append(fn(spec, args.steps))
    ratio = statistics.median(observed) / statistics.median(bare)
    print(f"sim engine, seed-5578, policy off, {args.steps} steps x {args.reps} reps (interleaved)")
    print(f"  bare vLLM engine      : median {statistics.median(bare):7.1f} steps/s  "
          f"{['%.1f' % x for x in bare]}")
    print(f"  observatory attached  : median {statistics.median(observed):7.1f} steps/s  "
          f"{['%.1f' % x for x in observed]}")
    print(f"  ratio observed/bare   : {ratio:.3f}  (target >= 0.97)")

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
