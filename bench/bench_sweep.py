"""Sweep figures, measured in one run on one local Ray runtime (2 CPUs):

1. Scaling: the same 8 demo cells with 1 cell at a time and with 2 at a time, alternating
   which goes first, several pairs; the median of the per-pair ratios is printed (target >= 1.8).
   Both workers have imported vLLM before timing starts (warm-up round), as in a long sweep.
2. Ray overhead per cell, from the 1-at-a-time rounds: (round wall time - sum of the cells' own
   times inside the worker) / cells (target <= 0.5 s). Also against the sessions' own run time
   (without building the engine), and the one-time costs: starting Ray, a worker's vLLM import.
3. Engine start per cell (building LLMEngine in a warm worker): median and max.
4. Cold end to end: `observatory sweep` on the same 8 cells with 2 workers from a fresh process
   (Ray start and imports included), against the sum of its cells.

The machine is shared: the load average before and after is printed with the figures.
Ray needs a private network namespace here (it probes a public address to find its node IP),
so the script re-runs itself under `unshare -n -p -f --mount-proc` (root) unless told not to.

Run: python bench/bench_sweep.py [--pairs N] [--no-unshare]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.spec import preset_spec  # noqa: E402
from engine.sweep.grid import build_axes, expand  # noqa: E402
from engine.sweep.ray_pool import ray_runtime, run_on_ray  # noqa: E402

GRID = ["num_cpu_blocks=384,512,768,1024", "policy=strict,watermark:0.5"]
MAX_STEPS = 400
INSIDE = "OBSERVATORY_BENCH_IN_NAMESPACE"


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run_round(cells, capacity: int):
    started = time.perf_counter()
    outcomes = [item[1] for item in run_on_ray(cells, False, capacity) if item is not None]
    wall = time.perf_counter() - started
    failed = [o.message for o in outcomes if o.status != "ok"]
    if failed:
        raise SystemExit(f"a bench cell failed: {failed[0]}")
    return wall, outcomes


def cold_cli(tmp: str) -> tuple[float, float, float, int]:
    out = Path(tmp) / "cold"
    argv = [sys.executable, "-m", "tui.cli", "sweep", "--preset", "demo", "--max-steps",
            str(MAX_STEPS), *sum((["--grid", g] for g in GRID), []), "--workers", "2",
            "--node-ip-address", "127.0.0.1", "--ray-temp-dir", tmp, "--no-report", "-o",
            str(out)]
    started = time.perf_counter()
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"cold sweep failed:\n{result.stderr}")
    import json

    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return (wall, sum(r["cell_s"] for r in rows), sum(r["import_s"] for r in rows), len(rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--no-unshare", action="store_true",
                        help="run here (a machine where Ray finds its address by itself)")
    args = parser.parse_args()
    if not args.no_unshare and os.environ.get(INSIDE) != "1":
        env = dict(os.environ, **{INSIDE: "1"}, RAY_AUTH_MODE="token",
                   RAY_AUTH_TOKEN=secrets.token_hex(32), RAY_USAGE_STATS_ENABLED="0")
        return subprocess.run(["unshare", "-n", "-p", "-f", "--mount-proc", "sh", "-c",
                               'ip link set lo up && "$@"', "sh", sys.executable, *sys.argv],
                              env=env, cwd=ROOT).returncode

    base = preset_spec("demo", max_steps=MAX_STEPS).validated()
    cells = expand(base, build_axes(GRID, None, base))
    print(f"machine: {os.cpu_count()} CPUs, load average before {loadavg()}")
    print(f"cells: {len(cells)} demo cells ({' x '.join(GRID)}, --max-steps {MAX_STEPS})")
    tmp = tempfile.mkdtemp(prefix="obs-ray-", dir="/tmp")
    log = Path(tmp) / "ray.log"
    started = time.perf_counter()
    with ray_runtime(None, 2, log, temp_dir=tmp, node_ip="127.0.0.1") as capacity:
        ray_start = time.perf_counter() - started
        warm_wall, warm = run_round(cells[:2], capacity)  # both workers import vLLM here
        imports = sorted(o.import_s for o in warm)
        one_walls, two_walls, ratios, overheads, session_overheads, starts = [], [], [], [], [], []
        cores: dict[int, list[float]] = {1: [], 2: []}
        per_cpu: dict[int, list[float]] = {1: [], 2: []}
        for pair in range(args.pairs):
            order = (1, 2) if pair % 2 == 0 else (2, 1)
            walls = {}
            for at_once in order:
                wall, outcomes = run_round(cells, at_once)
                walls[at_once] = wall
                starts += [o.engine_start_s for o in outcomes]
                if at_once == 1:
                    overheads.append((wall - sum(o.cell_s for o in outcomes)) / len(cells))
                    session_overheads.append(
                        (wall - sum(o.summary.wall_seconds for o in outcomes)) / len(cells))
                cpu = sum(o.cpu_s for o in outcomes)
                cores[at_once].append(cpu / wall)
                per_cpu[at_once].append(len(cells) / cpu)
                print(f"    {at_once} at a time: {wall:6.2f} s wall, {cpu:6.2f} CPU s in the "
                      f"workers: {cpu / wall:.2f} cores' worth")
            one_walls.append(walls[1])
            two_walls.append(walls[2])
            ratios.append(walls[1] / walls[2])
            print(f"  pair {pair + 1}: 1 at a time {walls[1]:6.2f} s, 2 at a time "
                  f"{walls[2]:6.2f} s, speed-up {ratios[-1]:.2f}  (load {loadavg()})")
    try:
        cold_wall, cold_cells, cold_imports, cold_n = cold_cli(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(f"Ray start (local runtime, 2 CPUs):           {ray_start:6.2f} s (once per sweep)")
    print(f"vLLM import in a fresh worker:               {imports[0]:6.2f} s / {imports[-1]:.2f} s"
          f" (the two workers, once each)")
    print(f"8 cells, 1 at a time (median):               {statistics.median(one_walls):6.2f} s")
    print(f"8 cells, 2 at a time (median):               {statistics.median(two_walls):6.2f} s")
    print(f"speed-up 2 workers vs 1 (median of pairs):   {statistics.median(ratios):6.2f}x "
          f"(target >= 1.8)")
    print(f"CPU the workers got (median):                1 at a time "
          f"{statistics.median(cores[1]):.2f} cores, 2 at a time "
          f"{statistics.median(cores[2]):.2f} cores")
    print(f"cells per CPU-second, 2 at a time / 1:       "
          f"{statistics.median(per_cpu[2]) / statistics.median(per_cpu[1]):6.2f} "
          f"(1.0 = running two at once costs no extra CPU)")
    autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled")
    if autogroup.exists() and autogroup.read_text().strip() == "1":
        print("  note: sched_autogroup is on: the sweep's processes share one scheduler group, "
              "so on a loaded machine a second worker gets no more CPU for the group")
    print(f"Ray overhead per cell vs cell time in worker:{statistics.median(overheads):6.3f} s "
          f"(target <= 0.5)")
    print(f"  ... vs the session's run time alone:       "
          f"{statistics.median(session_overheads):6.3f} s (adds building the engine)")
    print(f"engine start per cell (warm worker):         median {statistics.median(starts):.3f} s"
          f", max {max(starts):.3f} s over {len(starts)} cells")
    print(f"cold `observatory sweep`, {cold_n} cells, 2 workers: {cold_wall:6.2f} s wall; its "
          f"cells took {cold_cells:.2f} s in the workers, of which {cold_imports:.2f} s were "
          f"the workers' first vLLM imports (Ray start not in cells)")
    print(f"load average after: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
