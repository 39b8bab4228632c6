"""What measuring `exec_s` costs (engine.adapters.exec_timing).

1. Per call: the timing wrapper around a do-nothing `execute_model`, against the bare method,
   in alternating pairs of 200,000 calls; the difference of the medians is the wrapper's cost
   in nanoseconds per step. With CUDA, also the two `torch.cuda.synchronize()` calls the gpu
   backend adds, on an idle device (their cost on a busy device is the wait for its kernels:
   that is the step's own time, which is what exec_s measures).
2. Per step of the real engine: vLLM 0.5's LLMEngine with the sim executor on the seed-5578
   workload, stepped bare and with the timer attached, in alternating pairs: the looping
   thread's CPU microseconds per step (robust to other processes' load on a shared machine)
   and steps/s; the ratios of the medians (target: within noise of 1.0). The wrapper's cost
   from (1) over the step's CPU time is the bound that noise cannot blur.

Run: python bench/bench_exec_timing.py [--steps 400] [--pairs 5]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine.adapters import exec_timing  # noqa: E402
from engine.adapters.v0.build import cuda_available  # noqa: E402
from engine.spec import preset_spec  # noqa: E402
from bench_engine import bare_engine  # noqa: E402

CALLS = 200_000


class _Executor:
    def execute_model(self, execute_model_req=None):  # noqa: ANN001
        return execute_model_req


def per_call_ns(timed: bool, synchronize=None) -> float:
    executor = _Executor()
    if timed:
        exec_timing.ExecTimer(SimpleNamespace(model_executor=executor), synchronize)
    call = executor.execute_model
    start = time.perf_counter_ns()
    for _ in range(CALLS):
        call(None)
    return (time.perf_counter_ns() - start) / CALLS


def engine_steps_per_s(spec, steps: int, timed: bool, cpu_us: list[float]) -> float:
    """The bare vLLM loop on the sim engine, with or without the timer on its executor.
    Appends the thread's CPU microseconds per step to `cpu_us`."""
    engine = bare_engine(spec)
    timer = exec_timing.attach(engine, "sim") if timed else None
    gc.collect()
    gc.freeze()  # the GC's full collections would drown a 1% effect (see bench_engine.py)
    start, cpu_start = time.perf_counter(), time.thread_time()
    for _ in range(steps):
        engine.step()
        if timer is not None:
            timer.take()
    rate = steps / (time.perf_counter() - start)
    cpu_us.append(1e6 * (time.thread_time() - cpu_start) / steps)
    gc.unfreeze()
    return rate


def pairs(fn_a, fn_b, n: int) -> tuple[list[float], list[float]]:
    """n alternating pairs (a first, then b first, ...) so drift hits both sides alike."""
    a, b = [], []
    for i in range(n):
        order = ((fn_a, a), (fn_b, b)) if i % 2 == 0 else ((fn_b, b), (fn_a, a))
        for fn, out in order:
            out.append(fn())
    return a, b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")

    bare, timed = pairs(lambda: per_call_ns(False), lambda: per_call_ns(True), args.pairs)
    wrapper_ns = statistics.median(timed) - statistics.median(bare)
    print(f"per call, {CALLS:,} calls x {args.pairs} alternating pairs: bare "
          f"{statistics.median(bare):.0f} ns, timed {statistics.median(timed):.0f} ns, "
          f"wrapper cost {wrapper_ns:.0f} ns per step")
    if cuda_available():
        sync = exec_timing.cuda_synchronize()
        sync()
        plain, synced = pairs(lambda: per_call_ns(True), lambda: per_call_ns(True, sync),
                              args.pairs)
        print(f"  + two torch.cuda.synchronize() on an idle device: "
              f"{statistics.median(synced) - statistics.median(plain):.0f} ns per step")
    else:
        print("  (no CUDA: the gpu backend's synchronize cost is not measured here)")

    spec = preset_spec("seed-5578", policy="off").validated()
    engine_steps_per_s(spec, 20, False, [])  # warm-up: imports, caches
    bare_cpu: list[float] = []
    timed_cpu: list[float] = []
    bare, timed = pairs(lambda: engine_steps_per_s(spec, args.steps, False, bare_cpu),
                        lambda: engine_steps_per_s(spec, args.steps, True, timed_cpu),
                        args.pairs)
    print(f"sim engine, seed-5578, {args.steps} steps x {args.pairs} alternating pairs:")
    print(f"  bare  : median {statistics.median(bare):7.1f} steps/s, "
          f"{statistics.median(bare_cpu):7.0f} us CPU/step  {['%.1f' % x for x in bare]}")
    print(f"  timed : median {statistics.median(timed):7.1f} steps/s, "
          f"{statistics.median(timed_cpu):7.0f} us CPU/step  {['%.1f' % x for x in timed]}")
    print(f"  ratio timed/bare: steps/s {statistics.median(timed) / statistics.median(bare):.3f}"
          f", CPU per step {statistics.median(timed_cpu) / statistics.median(bare_cpu):.3f}")
    print(f"  wrapper cost / CPU per step: {wrapper_ns / 1e3 / statistics.median(bare_cpu):.4%}")


if __name__ == "__main__":
    main()
