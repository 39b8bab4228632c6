"""The per-version figures of docs/versions.md's table, for the installed vLLM:

1. `seed-5578` under policy `off`, recorded exactly as `observatory run --record` does: the step
   vLLM aborts at, the peak of the swapped queue (groups, and what a group is in this release),
   the CPU KV peak, and steps/s of the recorded run. With --record the recording is kept (the
   shipped recordings/seed-5578-off*.jsonl.zst come from here).
2. `seed-5578` under `strict` for the same number of steps: the CPU KV peak, and whether vLLM
   aborted anyway.
3. Observer overhead: steps/s of the bare engine loop against the observed session (policy
   off), in alternating pairs, ratio of the medians (bench_engine.py's two loops).

Run in each release's venv: python bench/bench_versions.py [--record PATH] [--steps N] [--reps R]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
from contextlib import redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine import bare_steps_per_s, observed_steps_per_s  # noqa: E402
from engine.adapters.versions import require_supported  # noqa: E402
from engine.cli import main as cli  # noqa: E402
from engine.stream.reader import load  # noqa: E402
from engine.stream.records import EngineAborted  # noqa: E402
from engine.spec import preset_spec  # noqa: E402


def record(policy: str, path: str, max_steps: int | None = None) -> tuple[list, EngineAborted | None]:
    argv = ["run", "--preset", "seed-5578", "--policy", policy, "--record", path]
    if max_steps is not None:
        argv += ["--max-steps", str(max_steps)]
    with redirect_stdout(io.StringIO()):
        cli(argv)
    recording = load(path)
    return list(recording.steps), recording.abort


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", help="keep the seed-5578 off recording here")
    parser.add_argument("--steps", type=int, default=300, help="timed steps per repetition")
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    release = require_supported()
    import vllm

    with tempfile.TemporaryDirectory() as tmp:
        off_path = args.record or f"{tmp}/off.jsonl.zst"
        off, abort = record("off", off_path)
        assert abort is not None, "seed-5578 under off did not abort"
        group = "n sequences" if release.family != "v064_0102" else "1 sequence (fan-out)"
        print(f"vLLM {vllm.__version__} (family {release.family}; a group is {group})")
        print(f"  off   : abort at step {abort.step}, peak swapped {max(s.swapped for s in off)} "
              f"groups, CPU KV peak {max(s.cpu_used for s in off)}/{off[-1].cpu_total} blocks, "
              f"{len(off) / off[-1].wall_s:.1f} steps/s recorded")
        strict, strict_abort = record("strict", f"{tmp}/strict.jsonl.zst", abort.step)
        peak = max(s.cpu_used for s in strict)
        print(f"  strict: {len(strict)} steps, CPU KV peak {peak}/{strict[-1].cpu_total} blocks "
              f"({100 * peak / strict[-1].cpu_total:.0f}%), peak swapped "
              f"{max(s.swapped for s in strict)}, "
              + (f"aborted at step {strict_abort.step}" if strict_abort else "no abort"))
    spec = preset_spec("seed-5578", policy="off", max_steps=args.steps + 1).validated()
    bare, observed = [], []
    for rep in range(args.reps):
        order = ((bare_steps_per_s, bare), (observed_steps_per_s, observed))
        for fn, out in (order if rep % 2 == 0 else order[::-1]):
            out.append(fn(spec, args.steps, True))
    ratio = statistics.median(observed) / statistics.median(bare)
    print(f"  overhead: bare {statistics.median(bare):.1f} steps/s, observed "
          f"{statistics.median(observed):.1f} steps/s, ratio {ratio:.3f} "
          f"({args.steps} steps x {args.reps} alternating pairs, workload frozen out of the GC)")


if __name__ == "__main__":
    main()
