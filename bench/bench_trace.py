"""How fast a big trace starts, and whether reading it stays in flat memory.

Writes a synthetic Mooncake trace of --lines requests (default 1,000,000; 1 ms apart, prompts
of 200-1,500 tokens over 64 shared 512-token prefixes, outputs of 8-64) to a temporary file,
then measures, in this process, on the installed vLLM (V0 or V1):

  1. resolve: what `--trace` costs before the engine is built (the file's sha256 and format),
     and the one read of the slice against the model's context before vLLM is imported
     (engine.traces.source.check_fits; inside the build's time below);
  2. first step: from Session.run() to the first step record (the trace's first requests read,
     their prompts made, handed to vLLM, one step scheduled); the engine build before it does
     not depend on the trace and is printed apart;
  3. memory: the workload's whole stream (every request read, checked and its prompt made,
     without an engine) with the process's RSS every 10% of it: flat means streamed.

Target: resolve + first step under 2 s for 1,000,000 lines, RSS growth under 50 MB over the
stream.

    PYTHONPATH=. python bench/bench_trace.py [--lines 1000000] [--keep FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def write_trace(path: str, lines: int) -> None:
    rng = random.Random(29)
    next_id = 1_000
    with open(path, "w") as f:
        for i in range(lines):
            length = rng.randint(200, 1_500)
            blocks = -(-length // 512)
            ids = [i % 64]
            while len(ids) < blocks:
                ids.append(next_id)
                next_id += 1
            f.write(json.dumps({"timestamp": i, "input_length": length,
                                "output_length": rng.randint(8, 64), "hash_ids": ids}) + "\n")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--keep", metavar="FILE", help="write the trace here and keep it")
    args = parser.parse_args()

    from engine.session import Session
    from engine.spec import RunSpec
    from engine.traces.source import check_fits, resolve
    from engine.workload import Workload
    from engine.stream.records import StepRecord, V1StepRecord

    tmp = tempfile.TemporaryDirectory()
    path = args.keep or os.path.join(tmp.name, "trace.jsonl")
    t = time.perf_counter()
    write_trace(path, args.lines)
    size = os.path.getsize(path)
    print(f"trace: {args.lines:,} lines, {size / 2**20:.0f} MiB (written in "
          f"{time.perf_counter() - t:.1f} s)")

    spec = RunSpec(trace=path, n=1, max_steps=20)
    t = time.perf_counter()
    resolved = resolve(spec)
    resolve_s = time.perf_counter() - t
    t = time.perf_counter()
    check_fits(resolved)
    print(f"the read against the model's context before the engine is built: "
          f"{time.perf_counter() - t:.1f} s")

    session = Session(spec)
    t = time.perf_counter()
    session.prepare()
    build_s = time.perf_counter() - t
    first = threading.Event()
    stamps: list[float] = []

    def sink(item: object) -> None:
        if type(item) in (StepRecord, V1StepRecord) and not first.is_set():
            stamps.append(time.perf_counter())
            first.set()

    session.subscribe(sink)
    t = time.perf_counter()
    session.run()
    first_step_s = stamps[0] - t if stamps else float("nan")
    print(f"resolve (sha256 + format): {resolve_s:.3f} s; engine build {build_s:.1f} s (not "
          f"the trace's); run() to first step: {first_step_s:.3f} s; trace's share of the "
          f"start: {resolve_s + first_step_s:.3f} s (target < 2 s)")

    workload = Workload(resolved, session.driver.max_model_len,
                        fan_out_samples=session.driver.kind == "v1")
    marks = {args.lines * k // 10 for k in range(1, 11)}
    samples: list[tuple[int, float]] = [(0, rss_mb())]
    t = time.perf_counter()
    count = 0
    for _ in workload.initial():
        count += 1
        if count in marks:
            samples.append((count, rss_mb()))
    stream_s = time.perf_counter() - t
    print(f"stream: {count:,} requests read, checked and made in {stream_s:.1f} s "
          f"({count / stream_s:,.0f}/s)")
    print("RSS MB: " + ", ".join(f"{n:,}: {mb:.0f}" for n, mb in samples))
    grow = samples[-1][1] - samples[1][1]
    print(f"RSS growth from 10% to 100% of the stream: {grow:+.1f} MB (target < 50 MB)")
    tmp.cleanup()


if __name__ == "__main__":
    main()
