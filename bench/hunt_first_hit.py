"""How far a hunt must search before a detector first fires: for each seed, run the hunt's
workloads in order (exactly as `observatory hunt --serial` runs them: one process, warm
engines, every detector, no shrinking) until DETECTOR fires or LIMIT workloads ran, and print
each workload's steps, seconds and hits. Machine-independent figure: the workload number of
the first hit; machine-dependent: the seconds to it (the load average is printed).

    PYTHONHASHSEED=0 python bench/hunt_first_hit.py --detector thrash --seeds 1 2 3 4 5
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--detector", required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--limit", type=int, default=64)
    parser.add_argument("--policy", default=None)
    parser.add_argument("--any-policy", action="store_true",
                        help="count a hit under any policy (default: only under off)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    start = time.perf_counter()
    from engine.hunt.caps import installed
    from engine.hunt.generate import generate
    from engine.hunt.runner import run_case
    from engine.hunt.warm import WarmEngines

    caps = installed()
    print(f"vLLM {caps.vllm}: imported in {time.perf_counter() - start:.0f} s; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    summary = []
    for seed in args.seeds:
        engines = WarmEngines()
        began = time.perf_counter()
        first = None
        for index in range(args.limit):
            case = generate(seed, index, caps, args.policy)
            t = time.perf_counter()
            outcome = run_case(case, engines=engines)
            took = time.perf_counter() - t
            hits = [h.detector for h in outcome.hits]
            if args.verbose or hits:
                print(f"  seed {seed} #{index:3d} {case.policy:28s} {len(case.rows):3d} req "
                      f"{outcome.end:10s} {outcome.steps:5d} steps {took:6.1f} s "
                      f"{' '.join(hits)}", flush=True)
            hit = outcome.fired(args.detector)
            if hit is not None and (args.any_policy or case.policy == "off"):
                first = (index, time.perf_counter() - began, case.policy, hit.what)
                break
        spent = time.perf_counter() - began
        line = (f"seed {seed}: {args.detector} at workload {first[0]} after {first[1]:.0f} s "
                f"({first[2]}): {first[3]}" if first else
                f"seed {seed}: no {args.detector} in {args.limit} workloads ({spent:.0f} s)")
        summary.append(line)
        print(line + f"; load average {os.getloadavg()[0]:.1f}", flush=True)
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
