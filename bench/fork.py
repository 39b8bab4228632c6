"""What a fork costs (issue #38): `observatory fork REC --at STEP` re-runs every step of REC
before STEP on the sim, so a fork at a long recording's last step is as slow as its re-run.
This prints the steps re-run per second, for both engine kinds:

- V1 (`--kind v1`, a V1 venv): a 100,000-step recording of v1-thrash's engine with enough
  requests to last (made first, in this run: `run --preset v1-thrash --requests 1000
  --max-steps 100000`), forked at its last step with whole-context;
- V0 (`--kind v0`, a V0 venv): the seed's shipped recording (recordings/seed-5578-off.jsonl.zst,
  805 steps up to vLLM's abort), forked at its aborting step with reserve.

Each fork is engine.analysis.fork.run_fork, as the CLI runs it (checking every re-run step
against the recording), recorded to a temporary file; one step under the new policy, then it
stops. The re-run's rate is timed between the fork's first step and the one before the fork
step (the engine's start-up, vLLM's import and the requests' arrival are said apart).

Run: PYTHONHASHSEED=0 python bench/fork.py --kind v1 [--steps N]
     python bench/fork.py --kind v0
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "recordings" / "seed-5578-off.jsonl.zst"


def load_avg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def record_v1(path: Path, steps: int) -> float:
    """A `steps`-step v1-thrash run with enough requests to last; its wall seconds."""
    from engine.cli.registry import main

    start = time.perf_counter()
    code = main(["run", "--preset", "v1-thrash", "--requests", "1000", "--max-steps", str(steps),
                 "--record", str(path)])
    if code != 0:
        raise SystemExit(f"recording the V1 run failed (exit {code})")
    return time.perf_counter() - start


def fork_last(path: Path, policy: str, out: Path) -> tuple[int, float, float, float]:
    """Fork `path` at its last forkable step under `policy`, one step after it. Returns (steps
    re-run, seconds of the re-run, seconds from the call to the first step, total seconds)."""
    from engine.analysis.fork import last_forkable_step, plan_fork, run_fork
    from engine.stream.reader import load
    from engine.stream.records import STEP_TYPES

    recording = load(path)
    at = last_forkable_step(recording)
    plan = plan_fork(recording, at, policy, max_steps=at + 1)
    marks: dict[int, float] = {}

    def mark(item) -> None:  # noqa: ANN001
        if type(item) in STEP_TYPES and item.step in (0, at - 1):
            marks[item.step] = time.perf_counter()

    start = time.perf_counter()
    result = run_fork(plan, str(out), on_item=mark)
    total = time.perf_counter() - start
    if result.check.unfaithful is not None:
        raise SystemExit(f"the re-run differs from the recording: {result.check.unfaithful}")
    return at, marks[at - 1] - marks[0], marks[0] - start, total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("v0", "v1"), required=True)
    parser.add_argument("--steps", type=int, default=100_000, help="V1 recording's steps")
    args = parser.parse_args()
    print(f"load average {load_avg()} before", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if args.kind == "v1":
            from engine.adapters.v1.platform import prepare_sim_process

            prepare_sim_process()
            path = Path(tmp) / "v1-long.jsonl.zst"
            made = record_v1(path, args.steps)
            print(f"recorded {args.steps:,} V1 steps (v1-thrash, 1,000 requests) in {made:.1f} s",
                  flush=True)
            policy, name = "whole-context", f"a {args.steps:,}-step v1-thrash recording"
        else:
            path, policy, name = SEED, "reserve", "recordings/seed-5578-off.jsonl.zst"
        steps, rerun_s, start_s, total_s = fork_last(path, policy, Path(tmp) / "fork.jsonl.zst")
    print(f"fork of {name} at step {steps:,} ({policy}): {steps:,} steps re-run at "
          f"{steps / rerun_s:,.0f} steps/s ({rerun_s:.1f} s); engine built and requests added "
          f"in {start_s:.1f} s; {total_s:.1f} s in all")
    print(f"load average {load_avg()} after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
