"""How many small hunt workloads one core runs a second, three ways (issue #40's warm engines).

- **warm**: one process, vLLM imported once, one engine per batch of workloads that share
  engine settings, reset between them (engine.hunt.warm): what `observatory hunt`'s workers
  do.
- **new engine**: one process, vLLM imported once, an engine built for every workload.
- **new process**: a process per workload: import vLLM, build, run (measured on a few).

The workloads are the hunt's own: seed SEED's first engine batches (engine.hunt.generate), run
exactly as `hunt` runs them (engine.hunt.runner.run_case, every detector on). Warm and new
engine alternate batch by batch in pairs (this machine is shared and noisy); the ratio is the
median of the pairs' ratios. Run it in the venv of the release to measure (V1 sim engines need
PYTHONHASHSEED=0):

    python bench/hunt_throughput.py                       # 0.5.0.post1's venv: V0
    PYTHONHASHSEED=0 python bench/hunt_throughput.py      # a V1 venv
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_ONE = """
import sys, time
t = time.perf_counter()
from engine.hunt.caps import installed
from engine.hunt.generate import generate
from engine.hunt.runner import run_case
run_case(generate({seed}, {index}, installed()))
print(time.perf_counter() - t)
"""


def batch(caps, seed: int, number: int, per_batch: int, warm: bool) -> tuple[float, int]:
    """Seconds to run batch `number`'s workloads, and how many ran."""
    from engine.hunt.generate import generate
    from engine.hunt.runner import run_case
    from engine.hunt.warm import WarmEngines

    engines = WarmEngines() if warm else None
    start = time.perf_counter()
    for index in range(number * per_batch, (number + 1) * per_batch):
        run_case(generate(seed, index, caps), engines=engines)
    return time.perf_counter() - start, per_batch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pairs", type=int, default=4, help="batches run both ways")
    parser.add_argument("--cold", type=int, default=2, help="workloads run in a new process")
    args = parser.parse_args()
    from engine.hunt.caps import installed
    from engine.hunt.generate import ENGINE_BATCH

    caps = installed()
    print(f"load average {os.getloadavg()[0]:.1f}; vLLM {caps.vllm} ({caps.kind}), seed "
          f"{args.seed}, batches of {ENGINE_BATCH} workloads sharing an engine", flush=True)
    batch(caps, args.seed, 0, 1, warm=False)  # import and first build out of the way
    ratios, warm_rates, new_rates = [], [], []
    for number in range(args.pairs):
        first_warm = number % 2 == 0
        runs = {}
        for warm in ((True, False) if first_warm else (False, True)):
            runs[warm] = batch(caps, args.seed, number, ENGINE_BATCH, warm)
        warm_rate = runs[True][1] / runs[True][0]
        new_rate = runs[False][1] / runs[False][0]
        warm_rates.append(warm_rate)
        new_rates.append(new_rate)
        ratios.append(warm_rate / new_rate)
        print(f"pair {number + 1}: warm {warm_rate:.2f}/s, new engine {new_rate:.2f}/s, "
              f"ratio {warm_rate / new_rate:.2f}", flush=True)
    cold = []
    for index in range(args.cold):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", _ONE.format(seed=args.seed, index=index)],
                       cwd=ROOT, check=True, capture_output=True)
        cold.append(time.perf_counter() - start)
    cold_rate = 1 / statistics.median(cold) if cold else float("nan")
    print(f"{caps.kind} {caps.vllm}: workloads per second per core: warm "
          f"{statistics.median(warm_rates):.2f}, new engine each "
          f"{statistics.median(new_rates):.2f}, new process each {cold_rate:.3f}; warm / new "
          f"engine {statistics.median(ratios):.2f}x (median of {len(ratios)} pairs), warm / "
          f"new process {statistics.median(warm_rates) / cold_rate:.0f}x; load average "
          f"{os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
